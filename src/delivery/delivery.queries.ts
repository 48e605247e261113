import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../db/ids';
import { sql } from '../db/orm';
import { type EmailType, suppressedError } from '../modules/emails';
import { EVENT_RECORD_COLUMNS, type ReturnedEvent } from '../modules/events';
import type { TrackingOverride } from '../modules/accounts';
import { suppressionOf } from '../modules/suppressions';
import type { returnPathVerified } from '../modules/domains';
import { type Attachment, type CampaignChunk, CLAIM_SECONDS, QUEUED_COLUMNS, type QueuedEmail } from './queued-email';

/**
 * The delivery path's SQL. Every statement here runs once per batch of mail, on the path that bounds
 * delivery speed (docs/performance.md), so each is one set-based statement over the whole batch rather
 * than a write per message through the unit of work.
 *
 * Transactional mail is claimed (FOR UPDATE SKIP LOCKED, so any number of drains on any worker share
 * it); a campaign's mail is read by contact-id ranges, each given to one activity, so it needs no claims.
 */

/** Whether a queued email's address is suppressed (`QueuedEmail.suppression`): two index lookups per row, in the statement that reads it. */
const SUPPRESSION = `${suppressionOf('lower(e.to_email)', 'e.project_id')} AS suppression`;

/** Claims due queued transactional mail for `owner`: every dispatcher shares this queue. Each row says whether its address is suppressed now. */
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
     RETURNING ${QUEUED_COLUMNS}, e.attempts, ${SUPPRESSION}`,
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
/**
 * How much of a campaign is still queued, and when the first of it (a retry after a 4xx, a local-time
 * zone's moment) comes due; an A/B test's rest, held until its winner is known, is not counted.
 */
export async function campaignLeft(em: EntityManager, campaignId: string): Promise<{ remaining: number; nextDueInSeconds: number | null }> {
  const [left] = await sql<{ remaining: number; next_due: number | null }>(
    em,
    `SELECT count(*)::int AS remaining, extract(epoch FROM min(next_attempt_at) - now())::float AS next_due
     FROM emails WHERE campaign_id = ? AND status = 'QUEUED' AND next_attempt_at <> 'infinity'`,
    [campaignId],
  );
  return { remaining: left.remaining, nextDueInSeconds: left.next_due === null ? null : Math.max(0, left.next_due) };
}
/**
 * A chunk's due recipients, with the attempt about to be made (recording its outcome writes it), each
 * saying whether its address was suppressed since the audience was fixed.
 */
export function campaignChunkEmails(em: EntityManager, campaignId: string, chunk: CampaignChunk): Promise<QueuedEmail[]> {
  return sql<QueuedEmail>(
    em,
    `SELECT ${QUEUED_COLUMNS}, e.attempts + 1 AS attempts, ${SUPPRESSION} FROM emails e
     WHERE e.campaign_id = ? AND e.contact_id > coalesce(?::uuid, '00000000-0000-0000-0000-000000000000') AND e.contact_id <= ?::uuid
       AND e.status = 'QUEUED' AND e.next_attempt_at <= now()
     ORDER BY e.contact_id`,
    [campaignId, chunk.after, chunk.upTo],
  );
}

/** Cancels queued mail that must not go (its MARKETING recipient unsubscribed since the audience was fixed). */
export async function cancelQueued(em: EntityManager, ids: string[], reason: string): Promise<void> {
  await sql(
    em,
    `UPDATE emails SET status = 'CANCELLED', claimed_until = NULL, last_error = ?, updated_at = now() WHERE id = ANY(?::uuid[]) AND status = 'QUEUED'`,
    [reason, ids],
  );
}

/**
 * Queued mail whose address is suppressed: SUPPRESSED, never sent, with an `email.suppressed` event saying
 * why, written only for the rows that really changed (so recording twice records once).
 */
export function markSuppressed(em: EntityManager, emails: QueuedEmail[]): Promise<ReturnedEvent[]> {
  return sql<ReturnedEvent>(
    em,
    `WITH v AS (
       SELECT * FROM unnest(?::uuid[], ?::uuid[], ?::jsonb[], ?::text[]) AS v(id, event_id, data, error)
     ), updated AS (
       UPDATE emails e SET status = 'SUPPRESSED', claimed_until = NULL, claimed_by = NULL, last_error = v.error, updated_at = now()
       FROM v WHERE e.id = v.id AND e.status = 'QUEUED'
       RETURNING e.id, e.project_id, e.contact_id
     )
     INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT v.event_id, u.project_id, u.contact_id, 'email.suppressed', v.data, now() FROM updated u JOIN v ON v.id = u.id
     RETURNING ${EVENT_RECORD_COLUMNS}`,
    [
      emails.map((e) => e.id),
      emails.map(() => newId()),
      emails.map((e) => JSON.stringify({ emailId: e.id, messageId: e.message_id, templateId: e.template_id, campaignId: e.campaign_id, ...e.suppression })),
      emails.map((e) => suppressedError(e.suppression!)),
    ],
  );
}

/** Gives the batch's unanswered mail back to the queue with why SMTP could not take it. */
export async function releaseWithError(em: EntityManager, ids: string[], error: string): Promise<void> {
  await sql(em, `UPDATE emails SET claimed_until = NULL, last_error = ? WHERE id = ANY(?::uuid[]) AND status = 'QUEUED'`, [error, ids]);
}

/** The batch's attachments, in message order. */
export function attachmentsOf(em: EntityManager, ids: string[]): Promise<Attachment[]> {
  return sql<Attachment>(
    em,
    `SELECT email_id, filename, content_type, content_id, disposition, content FROM email_attachments
     WHERE email_id = ANY(?::uuid[]) ORDER BY email_id, position`,
    [ids],
  );
}

export interface SigningDomain {
  project_id: string;
  domain: string;
  dkim_selector: string;
  dkim_private_key: string;
  record_status: Parameters<typeof returnPathVerified>[0];
}

/** The sender domains of a batch (`projectId:domain`), with their DKIM key and record status. */
export function signingDomains(em: EntityManager, senders: string[]): Promise<SigningDomain[]> {
  return sql<SigningDomain>(
    em,
    `SELECT d.project_id, d.domain, d.dkim_selector, d.dkim_private_key, d.record_status
     FROM domains d JOIN unnest(?::uuid[], ?::text[]) AS s(project_id, domain) ON d.project_id = s.project_id AND d.domain = s.domain`,
    [senders.map((s) => s.split(':')[0]), senders.map((s) => s.slice(s.indexOf(':') + 1))],
  );
}

export interface DraftCampaign {
  id: string;
  subject: string;
  body: string;
  type: EmailType;
  tracking: TrackingOverride | null;
  topic_id: string | null;
  ab_test: { variants: Array<{ id: string; subject?: string; body?: string; bodyHtml?: string }> } | null;
}

/** What renders a batch's campaign drafts: the campaigns' content. */
export function draftCampaigns(em: EntityManager, ids: string[]): Promise<DraftCampaign[]> {
  return sql<DraftCampaign>(
    em,
    `SELECT id, subject, COALESCE(body_html, body) AS body, type, tracking, topic_id, ab_test FROM campaigns WHERE id = ANY(?::uuid[])`,
    [ids],
  );
}

/**
 * Which of these (contact, topic) pairs the contact left (or has pending) since its mail was queued:
 * primary-key lookups of contact_topics, so a topic's mail goes only to contacts still receiving it.
 */
export async function topicsLeft(em: EntityManager, pairs: Array<{ contactId: string; topicId: string }>): Promise<Set<string>> {
  const rows = await sql<{ contact_id: string; topic_id: string }>(
    em,
    `SELECT ct.contact_id, ct.topic_id FROM contact_topics ct JOIN unnest(?::uuid[], ?::uuid[]) AS p(contact_id, topic_id)
       ON ct.contact_id = p.contact_id AND ct.topic_id = p.topic_id WHERE ct.state <> 'subscribed'`,
    [pairs.map((p) => p.contactId), pairs.map((p) => p.topicId)],
  );
  return new Set(rows.map((r) => `${r.contact_id}:${r.topic_id}`));
}

export interface DraftContact {
  id: string;
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
}

/** What renders a batch's campaign drafts: the recipients as they are now. */
export function draftContacts(em: EntityManager, ids: string[]): Promise<DraftContact[]> {
  return sql<DraftContact>(em, `SELECT id, email, subscribed, data FROM contacts WHERE id = ANY(?::uuid[])`, [ids]);
}

/** Adds `n` to a campaign's sent or failed counter. */
export async function addToCampaignCount(em: EntityManager, campaignId: string, column: 'sent_count' | 'failed_count', n: number): Promise<void> {
  await sql(em, `UPDATE campaigns SET ${column} = ${column} + ?, updated_at = now() WHERE id = ?`, [n, campaignId]);
}

/** Mail a server refused with 4xx waits for its next attempt (`delay` seconds), unclaimed. */
export async function scheduleRetries(em: EntityManager, rows: Array<{ id: string; attempts: number; delay: number; error: string }>): Promise<void> {
  await sql(
    em,
    `UPDATE emails e SET next_attempt_at = now() + make_interval(secs => v.delay), claimed_until = NULL,
                         attempts = v.attempts, last_error = v.error, updated_at = now()
     FROM unnest(?::uuid[], ?::int[], ?::int[], ?::text[]) AS v(id, attempts, delay, error) WHERE e.id = v.id AND e.status = 'QUEUED'`,
    [rows.map((r) => r.id), rows.map((r) => r.attempts), rows.map((r) => r.delay), rows.map((r) => r.error)],
  );
}

/** Mail refused for good becomes FAILED; answers the rows that changed, for their campaigns' counts. */
export function markFailed(
  em: EntityManager,
  rows: Array<{ id: string; attempts: number; error: string }>,
): Promise<Array<{ id: string; campaign_id: string | null }>> {
  return sql<{ id: string; campaign_id: string | null }>(
    em,
    `UPDATE emails e SET status = 'FAILED', failed_at = now(), claimed_until = NULL, attempts = v.attempts, last_error = v.error, updated_at = now()
     FROM unnest(?::uuid[], ?::int[], ?::text[]) AS v(id, attempts, error) WHERE e.id = v.id AND e.status = 'QUEUED' RETURNING e.id, e.campaign_id`,
    [rows.map((r) => r.id), rows.map((r) => r.attempts), rows.map((r) => r.error)],
  );
}

/** Unclaims mail refused during the SMTP session before its bounce is recorded; answers the ids still queued. */
export function unclaimRefused(em: EntityManager, rows: Array<{ id: string; attempts: number; error: string }>): Promise<Array<{ id: string }>> {
  return sql<{ id: string }>(
    em,
    `UPDATE emails e SET claimed_until = NULL, attempts = v.attempts, last_error = v.error, updated_at = now()
     FROM unnest(?::uuid[], ?::int[], ?::text[]) AS v(id, attempts, error) WHERE e.id = v.id AND e.status = 'QUEUED' RETURNING e.id`,
    [rows.map((r) => r.id), rows.map((r) => r.attempts), rows.map((r) => r.error)],
  );
}

/**
 * Accepted mail: each email still unsent becomes SENT, its campaign counts it, and its `email.sent`
 * event is written, only for the rows that really changed (so recording twice records once).
 */
export function markSent(
  em: EntityManager,
  rows: Array<{ id: string; attempts: number; providerMessageId: string | null; subject: string | null; eventId: string; data: string }>,
): Promise<ReturnedEvent[]> {
  return sql<ReturnedEvent>(
    em,
    // An open or click can be recorded before this (the recipient was quick): keep the higher status.
    // A campaign cancelled while this was in flight still sent it: what left is recorded as sent.
    `WITH v AS (
       SELECT * FROM unnest(?::uuid[], ?::int[], ?::text[], ?::text[], ?::uuid[], ?::jsonb[]) AS v(id, attempts, pid, subject, event_id, data)
     ), updated AS (
       UPDATE emails e SET status = CASE WHEN e.status IN ('QUEUED', 'CANCELLED') THEN 'SENT' ELSE e.status END, sent_at = now(),
                           provider_message_id = v.pid, subject = coalesce(v.subject, e.subject), claimed_until = NULL,
                           attempts = v.attempts, last_error = NULL, updated_at = now()
       FROM v WHERE e.id = v.id AND e.sent_at IS NULL AND e.status <> 'FAILED'
       RETURNING e.id, e.project_id, e.contact_id, e.campaign_id
     ), counted AS (
       UPDATE campaigns c SET sent_count = c.sent_count + u.n, updated_at = now()
       FROM (SELECT campaign_id, count(*)::int AS n FROM updated WHERE campaign_id IS NOT NULL GROUP BY campaign_id) u
       WHERE c.id = u.campaign_id
     )
     INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT v.event_id, u.project_id, u.contact_id, 'email.sent', v.data, now() FROM updated u JOIN v ON v.id = u.id WHERE u.contact_id IS NOT NULL
     RETURNING ${EVENT_RECORD_COLUMNS}`,
    [
      rows.map((r) => r.id),
      rows.map((r) => r.attempts),
      rows.map((r) => r.providerMessageId),
      rows.map((r) => r.subject),
      rows.map((r) => r.eventId),
      rows.map((r) => r.data),
    ],
  );
}
