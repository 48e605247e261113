import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { badRequest } from '../../errors';
import { compileCondition, loadSegmentRefs, membersWhere } from '../segments';
import { notSuppressedWhere } from '../suppressions';
import { receivesTopicWhere } from '../topics';
import { CAMPAIGN_STOPPED_CHANNEL } from './campaign-stops';
import type { Campaign } from './campaigns.entity';
import type { LocalTime } from './campaigns.schemas';

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

/** Rows an A/B test holds back for its winner: never due until the winner is decided (`releaseHeld`). */
export const HELD = `'infinity'::timestamptz`;

/** What a recipient's message is made of: the campaign's fields, or an A/B variant's in their place. */
export interface MessageFields {
  fromEmail: string;
  fromName: string | null;
  replyTo: string;
  subject: string;
}

/**
 * An A/B test's audience, queued in one statement: the audience in a deterministic order (a hash of
 * campaign id and contact id), its first round(N × testPercent / 100) dealt to the variants in turn
 * (so their sizes differ by one at most), the rest held without a variant until the winner is known.
 * Run once per campaign (the audience is fixed once), so a retried or restarted workflow deals no one
 * a second variant.
 */
export async function queueAbAudience(tx: EntityManager, c: Campaign, variants: Array<MessageFields & { id: string }>, testPercent: number): Promise<number> {
  const params: unknown[] = [];
  const where = await audienceWhere(tx, c, params);
  const domain = c.fromEmail.slice(c.fromEmail.lastIndexOf('@') + 1);
  const pick = (column: string) => `CASE WHEN a.g IS NULL THEN ? ELSE (?::text[])[a.g] END AS ${column}`;
  const [{ n }] = await sql<{ n: number }>(
    tx,
    `WITH dealt AS (
       SELECT a.contact_id, a.email,
              CASE WHEN a.rn <= round(a.total * ?::numeric / 100) THEN ((a.rn - 1) % ?)::int + 1 END AS g
       FROM (SELECT c.id AS contact_id, c.email, row_number() OVER (ORDER BY md5(?::text || c.id::text), c.id) AS rn, count(*) OVER () AS total
             FROM contacts c WHERE ${where}) a
     ), queued AS (
       INSERT INTO emails (id, project_id, contact_id, campaign_id, type, from_email, from_name, reply_to, to_email,
                           subject, html, text, headers, status, message_id, variant_id, next_attempt_at)
       SELECT b.id, ?, b.contact_id, ?, ?, b.from_email, b.from_name, b.reply_to, b.email, b.subject, NULL, NULL, '{}'::jsonb, 'QUEUED',
              '<' || b.id || '@' || ? || '>', b.variant_id, CASE WHEN b.variant_id IS NULL THEN ${HELD} ELSE now() END
       FROM (SELECT gen_random_uuid() AS id, a.contact_id, a.email, ${pick('from_email')}, ${pick('from_name')}, ${pick('reply_to')},
                    ${pick('subject')}, (?::text[])[a.g] AS variant_id
             FROM dealt a) b
       ON CONFLICT (campaign_id, contact_id) WHERE campaign_id IS NOT NULL DO NOTHING
       RETURNING 1
     ) SELECT count(*)::int AS n FROM queued`,
    [
      testPercent,
      variants.length,
      c.id,
      ...params,
      c.projectId,
      c.id,
      c.type,
      domain,
      c.fromEmail,
      variants.map((v) => v.fromEmail),
      c.fromName,
      variants.map((v) => v.fromName),
      c.replyTo ?? c.fromEmail,
      variants.map((v) => v.replyTo),
      c.subject,
      variants.map((v) => v.subject),
      variants.map((v) => v.id),
    ],
  );
  return n;
}

/** The held rest of an A/B test's audience gets the winner, and comes due now. */
export async function releaseHeld(tx: EntityManager, campaignId: string, winner: MessageFields & { id: string }): Promise<number> {
  const rows = await sql(
    tx,
    `UPDATE emails SET variant_id = ?, from_email = ?, from_name = ?, reply_to = ?, subject = ?, next_attempt_at = now(), updated_at = now()
     WHERE campaign_id = ? AND status = 'QUEUED' AND next_attempt_at = ${HELD} RETURNING 1`,
    [winner.id, winner.fromEmail, winner.fromName, winner.replyTo, winner.subject, campaignId],
  );
  return rows.length;
}

/** Each variant's emails: sent, opened at least once, clicked at least once. */
export function variantCounts(em: EntityManager, campaignId: string): Promise<Array<{ variant_id: string; sent: number; opened: number; clicked: number }>> {
  return sql(
    em,
    `SELECT variant_id, count(*) FILTER (WHERE sent_at IS NOT NULL)::int AS sent, count(*) FILTER (WHERE opened_at IS NOT NULL)::int AS opened,
            count(*) FILTER (WHERE clicked_at IS NOT NULL)::int AS clicked
     FROM emails WHERE campaign_id = ? AND variant_id IS NOT NULL GROUP BY variant_id`,
    [campaignId],
  );
}

/**
 * A local-time campaign's audience, queued in one statement: each recipient's zone (their
 * `data.timezone` when PostgreSQL knows it as a zone name, else the default) and the moment `at` on
 * `date` there, which is when their email comes due. A moment already past follows `pastPolicy`: due
 * now, a day later, or cancelled (skipped).
 */
export async function queueLocalAudience(tx: EntityManager, c: Campaign, local: LocalTime): Promise<number> {
  const params: unknown[] = [];
  const where = await audienceWhere(tx, c, params);
  const domain = c.fromEmail.slice(c.fromEmail.lastIndexOf('@') + 1);
  const [{ n }] = await sql<{ n: number }>(
    tx,
    `WITH zoned AS (
       SELECT z.*, (?::date + ?::time) AT TIME ZONE z.zone AS moment, (?::date + 1 + ?::time) AT TIME ZONE z.zone AS next_day
       FROM (SELECT c.id AS contact_id, c.email,
                    CASE WHEN c.data->>'timezone' IN (SELECT name FROM pg_timezone_names) THEN c.data->>'timezone' ELSE ? END AS zone
             FROM contacts c WHERE ${where}) z
     ), queued AS (
       INSERT INTO emails (id, project_id, contact_id, campaign_id, type, from_email, from_name, reply_to, to_email,
                           subject, html, text, headers, status, message_id, time_zone, next_attempt_at, last_error)
       SELECT a.id, ?, a.contact_id, ?, ?, ?, ?, ?, a.email, ?, NULL, NULL, '{}'::jsonb,
              CASE WHEN a.moment <= now() AND ? = 'skip' THEN 'CANCELLED' ELSE 'QUEUED' END,
              '<' || a.id || '@' || ? || '>', a.zone,
              CASE WHEN a.moment > now() THEN a.moment WHEN ? = 'next_day' THEN a.next_day ELSE now() END,
              CASE WHEN a.moment <= now() AND ? = 'skip' THEN 'its local time had passed when sending started' END
       FROM (SELECT gen_random_uuid() AS id, zoned.* FROM zoned) a
       ON CONFLICT (campaign_id, contact_id) WHERE campaign_id IS NOT NULL DO NOTHING
       RETURNING 1
     ) SELECT count(*)::int AS n FROM queued`,
    [
      local.date,
      local.at,
      local.date,
      local.at,
      local.defaultTimezone,
      ...params,
      c.projectId,
      c.id,
      c.type,
      c.fromEmail,
      c.fromName,
      c.replyTo ?? c.fromEmail,
      c.subject,
      local.pastPolicy,
      domain,
      local.pastPolicy,
      local.pastPolicy,
    ],
  );
  return n;
}

/** A local-time campaign's zones whose moment has not come yet, with their recipients, soonest first. */
export function waitingZones(em: EntityManager, campaignId: string): Promise<Array<{ timezone: string; send_at: string | Date; recipients: number }>> {
  return sql(
    em,
    `SELECT time_zone AS timezone, min(next_attempt_at) AS send_at, count(*)::int AS recipients
     FROM emails WHERE campaign_id = ? AND status = 'QUEUED' AND attempts = 0 AND next_attempt_at > now() AND time_zone IS NOT NULL
     GROUP BY time_zone ORDER BY send_at, time_zone`,
    [campaignId],
  );
}

/** SENDING becomes SENT only when no recipient is still queued: the check and the write must be one statement. */
export async function markSentWhenDone(em: EntityManager, campaignId: string): Promise<boolean> {
  const rows = await sql(
    em,
    `UPDATE campaigns SET status = 'SENT', sent_at = now(), updated_at = now(), ab_phase = CASE WHEN ab_test IS NULL THEN NULL ELSE 'done' END
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
