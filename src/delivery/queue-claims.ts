import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/orm';
import { type CampaignChunk, CLAIM_SECONDS, QUEUED_COLUMNS, type QueuedEmail } from './queued-email';

/**
 * Transactional mail is claimed (FOR UPDATE SKIP LOCKED, so any number of drains on any worker share
 * it); a campaign's mail is read by contact-id ranges, each given to one activity, so it needs no claims.
 */

/** Claims due queued transactional mail for `owner`: every dispatcher shares this queue. */
export async function claimDue(em: EntityManager, owner: string, batchSize: number): Promise<QueuedEmail[]> {
  return sql<QueuedEmail>(
    em,
    `WITH due AS (
       SELECT id FROM emails
       WHERE status = 'QUEUED' AND campaign_id IS NULL
         AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
       ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED
     )
     UPDATE emails e SET claimed_until = now() + make_interval(secs => ?), claimed_by = ?, attempts = e.attempts + 1
     FROM due WHERE e.id = due.id
     RETURNING ${QUEUED_COLUMNS}, e.attempts`,
    [batchSize, CLAIM_SECONDS, owner],
  );
}
/** Gives back the unsent mail `owner` holds claimed: any drain may take it at once. */
export async function releaseClaims(em: EntityManager, owner: string): Promise<void> {
  await sql(em, `UPDATE emails SET claimed_until = NULL, claimed_by = NULL WHERE claimed_by = ? AND status = 'QUEUED'`, [owner]);
}
/** When the next queued transactional message comes due (a retry after backoff, a claim left by a dead process). */
export async function nextDueInSeconds(em: EntityManager): Promise<number | null> {
  const [next] = await sql<{ due: number | null }>(
    em,
    `SELECT extract(epoch FROM min(greatest(next_attempt_at, coalesce(claimed_until, next_attempt_at))) - now())::float AS due
     FROM emails WHERE status = 'QUEUED' AND campaign_id IS NULL`,
  );
  return next.due === null ? null : Math.max(0, next.due);
}

/**
 * Splits what is due of a campaign into chunks of at most `size` recipients, by contact id (the
 * unique index the campaign's rows already have), after `after`: up to `count` of them. Each chunk is
 * delivered by one activity, so chunks on any worker never overlap and need no claims.
 */
export async function campaignChunks(em: EntityManager, campaignId: string, after: string | null, size: number, count: number): Promise<CampaignChunk[]> {
  const ids = await sql<{ contact_id: string }>(
    em,
    `SELECT contact_id FROM emails WHERE campaign_id = ? AND status = 'QUEUED' AND next_attempt_at <= now()
       AND contact_id > coalesce(?::uuid, '00000000-0000-0000-0000-000000000000')
     ORDER BY contact_id LIMIT ?`,
    [campaignId, after, size * count],
  );
  const chunks: CampaignChunk[] = [];
  for (let i = 0; i < ids.length; i += size) {
    chunks.push({ after: i === 0 ? after : ids[i - 1].contact_id, upTo: ids[Math.min(i + size, ids.length) - 1].contact_id });
  }
  return chunks;
}
/** How much of a campaign is still queued, and when the first of it (a retry after a 4xx) comes due. */
export async function campaignLeft(em: EntityManager, campaignId: string): Promise<{ remaining: number; nextDueInSeconds: number | null }> {
  const [left] = await sql<{ remaining: number; next_due: number | null }>(
    em,
    `SELECT count(*)::int AS remaining, extract(epoch FROM min(next_attempt_at) - now())::float AS next_due
     FROM emails WHERE campaign_id = ? AND status = 'QUEUED'`,
    [campaignId],
  );
  return { remaining: left.remaining, nextDueInSeconds: left.next_due === null ? null : Math.max(0, left.next_due) };
}
/** A chunk's due recipients, with the attempt about to be made (recording its outcome writes it). */
export function campaignChunkEmails(em: EntityManager, campaignId: string, chunk: CampaignChunk): Promise<QueuedEmail[]> {
  return sql<QueuedEmail>(
    em,
    `SELECT ${QUEUED_COLUMNS}, e.attempts + 1 AS attempts FROM emails e
     WHERE e.campaign_id = ? AND e.contact_id > coalesce(?::uuid, '00000000-0000-0000-0000-000000000000') AND e.contact_id <= ?::uuid
       AND e.status = 'QUEUED' AND e.next_attempt_at <= now()
     ORDER BY e.contact_id`,
    [campaignId, chunk.after, chunk.upTo],
  );
}
