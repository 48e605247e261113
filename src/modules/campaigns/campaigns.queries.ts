import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { badRequest } from '../../http/errors';
import { compileCondition, loadSegmentRefs, membersWhere } from '../segments';
import { notSuppressedWhere } from '../suppressions';
import { receivesTopicWhere } from '../topics';
import { CAMPAIGN_STOPPED_CHANNEL } from './campaign-stops';
import type { Campaign } from './campaigns.entity';

/**
 * The campaigns module's hand-written SQL: who a campaign reaches is a condition compiled to SQL, so
 * the audience is counted and queued set-based; the rest of the module goes through the EntityManager.
 */

/**
 * SQL (on `contacts c`) for who a campaign reaches: ALL, a segment's members, or a condition, and
 * always only subscribed contacts (unsubscribed and snoozed contacts never receive a campaign); with a
 * topic, only those that receive the topic (pending and opted-out contacts do not). Suppressed addresses
 * are left out: an anti-join on the list, and the project's rules.
 */
async function audienceWhere(em: EntityManager, c: Campaign, params: unknown[]): Promise<string> {
  params.push(c.projectId);
  let where = 'c.project_id = ? AND c.subscribed';
  if (c.audienceType === 'SEGMENT') {
    const segments = await loadSegmentRefs(em, c.projectId);
    const segment = segments.get(c.segmentId!);
    if (!segment) throw badRequest('The campaign’s segment no longer exists', 'SEGMENT_NOT_FOUND');
    where += ` AND ${membersWhere(segment, segments, params)}`;
  } else if (c.audienceType === 'FILTERED' && c.audienceCondition) {
    const segments = await loadSegmentRefs(em, c.projectId);
    where += ` AND ${compileCondition(c.audienceCondition, { now: Date.now(), segments }, params)}`;
  }
  if (c.topicId) where += ` AND ${await receivesTopicWhere(em, c.projectId, c.topicId, params)}`;
  where += ` AND ${await notSuppressedWhere(em, c.projectId, params)}`;
  return where;
}

/** How many contacts the campaign reaches now: a count over the compiled audience condition. */
export async function audienceSize(em: EntityManager, c: Campaign): Promise<number> {
  const params: unknown[] = [];
  const where = await audienceWhere(em, c, params);
  const [{ n }] = await sql<{ n: number }>(em, `SELECT count(*)::int AS n FROM contacts c WHERE ${where}`, params);
  return n;
}

/**
 * Queues one unrendered email per recipient, answering how many were queued: one INSERT ... SELECT over
 * the compiled audience, whose ON CONFLICT skips recipients a previous run already queued.
 */
export async function queueAudience(tx: EntityManager, c: Campaign): Promise<number> {
  const params: unknown[] = [];
  const where = await audienceWhere(tx, c, params);
  const domain = c.fromEmail.slice(c.fromEmail.lastIndexOf('@') + 1);
  const [{ n }] = await sql<{ n: number }>(
    tx,
    `WITH queued AS (
       INSERT INTO emails (id, project_id, contact_id, campaign_id, type, from_email, from_name, reply_to, to_email,
                           subject, html, text, headers, status, message_id)
       SELECT a.id, ?, a.contact_id, ?, ?, ?, ?, ?, a.email, ?, NULL, NULL, '{}'::jsonb, 'QUEUED', '<' || a.id || '@' || ? || '>'
       FROM (SELECT gen_random_uuid() AS id, c.id AS contact_id, c.email FROM contacts c WHERE ${where}) a
       ON CONFLICT (campaign_id, contact_id) WHERE campaign_id IS NOT NULL DO NOTHING
       RETURNING 1
     ) SELECT count(*)::int AS n FROM queued`,
    [c.projectId, c.id, c.type, c.fromEmail, c.fromName, c.replyTo ?? c.fromEmail, c.subject, domain, ...params],
  );
  return n;
}

/** SENDING becomes SENT only when no recipient is still queued: the check and the write must be one statement. */
export async function markSentWhenDone(em: EntityManager, campaignId: string): Promise<boolean> {
  const rows = await sql(
    em,
    `UPDATE campaigns SET status = 'SENT', sent_at = now(), updated_at = now()
     WHERE id = ? AND status = 'SENDING' AND NOT EXISTS (SELECT 1 FROM emails WHERE campaign_id = ? AND status = 'QUEUED')
     RETURNING id`,
    [campaignId, campaignId],
  );
  return rows.length > 0;
}

/** What became of a campaign's emails: an aggregate over all of them. */
export async function emailCounts(em: EntityManager, campaignId: string) {
  const [counts] = await sql<Record<string, number>>(
    em,
    `SELECT count(*)::int AS total,
            count(*) FILTER (WHERE status = 'QUEUED')::int AS queued,
            count(*) FILTER (WHERE sent_at IS NOT NULL)::int AS sent,
            count(*) FILTER (WHERE delivered_at IS NOT NULL)::int AS delivered,
            count(*) FILTER (WHERE opened_at IS NOT NULL)::int AS opened,
            count(*) FILTER (WHERE clicked_at IS NOT NULL)::int AS clicked,
            count(*) FILTER (WHERE bounced_at IS NOT NULL)::int AS bounced,
            count(*) FILTER (WHERE complained_at IS NOT NULL)::int AS complained,
            count(*) FILTER (WHERE status = 'FAILED')::int AS failed,
            count(*) FILTER (WHERE status = 'CANCELLED')::int AS cancelled,
            count(*) FILTER (WHERE status = 'SUPPRESSED')::int AS suppressed,
            coalesce(sum(open_count), 0)::int AS opens,
            coalesce(sum(click_count), 0)::int AS clicks
       FROM emails WHERE campaign_id = ?`,
    [campaignId],
  );
  return counts;
}

/** Tells every worker the campaign stopped sending (`CampaignStops`); PostgreSQL delivers it when the transaction commits. */
export async function notifyCampaignStopped(tx: EntityManager, campaignId: string): Promise<void> {
  await sql(tx, `SELECT pg_notify(?, ?)`, [CAMPAIGN_STOPPED_CHANNEL, campaignId]);
}
