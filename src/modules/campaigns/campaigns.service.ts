import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { AppError, badRequest, conflict, notFound } from '../../http/errors';
import type { TemporalClient } from '../../../temporal/client';
import { assertWithinBillingLimits, billingPeriod } from '../billing';
import { cancelCampaignWorkflow, rescheduleCampaignWorkflow, startCampaignWorkflow } from './campaign-send';
import { assertVerifiedSender } from '../domains';
import { compileCondition } from '../segments';
import { loadSegmentRefs } from '../segments';
import type { ConditionTree } from '../segments';
import { checkCondition, membersWhere } from '../segments';
import type { TrackingOverride } from '../accounts';
import type { CampaignInput, CampaignStatus } from './campaigns.schemas';

export interface CampaignRow {
  id: string;
  project_id: string;
  name: string;
  description: string | null;
  subject: string;
  body: string;
  from_email: string;
  from_name: string | null;
  reply_to: string | null;
  type: 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
  tracking: TrackingOverride | null;
  status: CampaignStatus;
  audience_type: 'ALL' | 'SEGMENT' | 'FILTERED';
  segment_id: string | null;
  audience_condition: ConditionTree | null;
  scheduled_for: Date | null;
  total_recipients: number;
  sent_count: number;
  delivered_count: number;
  opened_count: number;
  clicked_count: number;
  bounced_count: number;
  complained_count: number;
  failed_count: number;
  sent_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);

export const toCampaignDto = (c: CampaignRow) => ({
  id: c.id,
  name: c.name,
  description: c.description,
  subject: c.subject,
  body: c.body,
  from: c.from_email,
  fromName: c.from_name,
  replyTo: c.reply_to,
  type: c.type,
  tracking: c.tracking,
  status: c.status,
  audienceType: c.audience_type,
  ...(c.audience_type === 'SEGMENT' ? { segmentId: c.segment_id } : {}),
  ...(c.audience_type === 'FILTERED' ? { audienceCondition: c.audience_condition } : {}),
  scheduledFor: iso(c.scheduled_for),
  totalRecipients: c.total_recipients,
  sentCount: c.sent_count,
  deliveredCount: c.delivered_count,
  openedCount: c.opened_count,
  clickedCount: c.clicked_count,
  bouncedCount: c.bounced_count,
  projectId: c.project_id,
  sentAt: iso(c.sent_at),
  createdAt: iso(c.created_at)!,
  updatedAt: iso(c.updated_at)!,
});

export async function getCampaign(em: EntityManager, projectId: string, id: string, lock = false): Promise<CampaignRow> {
  const [row] = await sql<CampaignRow>(em, `SELECT * FROM campaigns WHERE project_id = ? AND id = ?${lock ? ' FOR UPDATE' : ''}`, [projectId, id]);
  if (!row) throw notFound('Campaign');
  return row;
}

/** The columns a create and a PUT both write, in the order both statements list them. */
function campaignValues(input: CampaignInput, audience: Awaited<ReturnType<typeof checkAudience>>): unknown[] {
  return [
    input.name,
    input.description ?? null,
    input.subject,
    input.body,
    input.from,
    input.fromName ?? null,
    input.replyTo ?? null,
    input.type,
    input.audienceType,
    audience.segmentId,
    audience.condition ? JSON.stringify(audience.condition) : null,
    input.tracking ? JSON.stringify(input.tracking) : null,
  ];
}

/** The audience rules of create and PUT: 400 for a missing segment or condition, 403 for the sender. */
async function checkAudience(
  em: EntityManager,
  projectId: string,
  input: CampaignInput,
): Promise<{ segmentId: string | null; condition: ConditionTree | null }> {
  if (input.audienceType === 'SEGMENT') {
    if (!input.segmentId) throw badRequest('segmentId is required when audienceType is SEGMENT', 'SEGMENT_REQUIRED');
    const [segment] = await sql(em, `SELECT 1 FROM segments WHERE project_id = ? AND id = ?`, [projectId, input.segmentId]);
    if (!segment) throw badRequest(`Segment ${input.segmentId} does not exist in this project`, 'SEGMENT_NOT_FOUND');
    return { segmentId: input.segmentId, condition: null };
  }
  if (input.audienceType === 'FILTERED') {
    if (input.audienceCondition === undefined || input.audienceCondition === null) {
      throw badRequest('audienceCondition is required when audienceType is FILTERED', 'CONDITION_REQUIRED');
    }
    const condition = await checkCondition(em, projectId, input.audienceCondition).catch((err: AppError) => {
      throw badRequest(err.message, 'INVALID_CONDITION');
    });
    return { segmentId: null, condition };
  }
  return { segmentId: null, condition: null };
}

export async function createCampaign(em: EntityManager, projectId: string, input: CampaignInput): Promise<CampaignRow> {
  const audience = await checkAudience(em, projectId, input);
  await assertVerifiedSender(em, projectId, input.from);
  const [row] = await sql<CampaignRow>(
    em,
    `INSERT INTO campaigns (id, project_id, name, description, subject, body, from_email, from_name, reply_to, type,
                            audience_type, segment_id, audience_condition, tracking)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb) RETURNING *`,
    [newId(), projectId, ...campaignValues(input, audience)],
  );
  return row;
}

/** PUT: replaces every field; only a DRAFT or SCHEDULED campaign can still change. */
export async function replaceCampaign(em: EntityManager, projectId: string, id: string, input: CampaignInput): Promise<CampaignRow> {
  const current = await getCampaign(em, projectId, id);
  if (current.status !== 'DRAFT' && current.status !== 'SCHEDULED') {
    throw badRequest(`A ${current.status} campaign cannot be changed`, 'CAMPAIGN_NOT_EDITABLE');
  }
  const audience = await checkAudience(em, projectId, input);
  await assertVerifiedSender(em, projectId, input.from);
  const [row] = await sql<CampaignRow>(
    em,
    `UPDATE campaigns SET name = ?, description = ?, subject = ?, body = ?, from_email = ?, from_name = ?, reply_to = ?, type = ?,
       audience_type = ?, segment_id = ?, audience_condition = ?::jsonb, tracking = ?::jsonb, updated_at = now()
     WHERE project_id = ? AND id = ? AND status IN ('DRAFT', 'SCHEDULED') RETURNING *`,
    [...campaignValues(input, audience), projectId, id],
  );
  if (!row) throw badRequest('The campaign is no longer editable', 'CAMPAIGN_NOT_EDITABLE');
  return row;
}

/** Only a draft can be deleted; a scheduled or sending campaign has an active execution (409). */
export async function deleteCampaign(em: EntityManager, projectId: string, id: string): Promise<void> {
  const c = await getCampaign(em, projectId, id);
  if (c.status === 'SCHEDULED' || c.status === 'SENDING') {
    throw conflict(`The campaign is ${c.status}: cancel it first`, 'CAMPAIGN_ACTIVE');
  }
  if (c.status !== 'DRAFT') throw badRequest(`A ${c.status} campaign is kept for its statistics; only drafts can be deleted`, 'CAMPAIGN_NOT_DELETABLE');
  await sql(em, `DELETE FROM campaigns WHERE id = ? AND status = 'DRAFT'`, [id]);
}

export async function duplicateCampaign(em: EntityManager, projectId: string, id: string): Promise<CampaignRow> {
  const [row] = await sql<CampaignRow>(
    em,
    `INSERT INTO campaigns (id, project_id, name, description, subject, body, from_email, from_name, reply_to, type,
                            audience_type, segment_id, audience_condition, tracking)
     SELECT ?, project_id, name || ' (copy)', description, subject, body, from_email, from_name, reply_to, type,
            audience_type, segment_id, audience_condition, tracking
     FROM campaigns WHERE project_id = ? AND id = ? RETURNING *`,
    [newId(), projectId, id],
  );
  if (!row) throw notFound('Campaign');
  return row;
}

/**
 * SQL (on `contacts c`) for who a campaign reaches: ALL, a segment's members, or a condition, and
 * always only subscribed contacts (unsubscribed and snoozed contacts never receive a campaign).
 */
export async function audienceWhere(em: EntityManager, c: CampaignRow, params: unknown[]): Promise<string> {
  params.push(c.project_id);
  let where = 'c.project_id = ? AND c.subscribed';
  if (c.audience_type === 'SEGMENT') {
    const segments = await loadSegmentRefs(em, c.project_id);
    const segment = segments.get(c.segment_id!);
    if (!segment) throw badRequest('The campaign’s segment no longer exists', 'SEGMENT_NOT_FOUND');
    where += ` AND ${membersWhere(segment, segments, params)}`;
  } else if (c.audience_type === 'FILTERED' && c.audience_condition) {
    const segments = await loadSegmentRefs(em, c.project_id);
    where += ` AND ${compileCondition(c.audience_condition, { now: Date.now(), segments }, params)}`;
  }
  return where;
}

export async function audienceSize(em: EntityManager, c: CampaignRow): Promise<number> {
  const params: unknown[] = [];
  const where = await audienceWhere(em, c, params);
  const [{ n }] = await sql<{ n: number }>(em, `SELECT count(*)::int AS n FROM contacts c WHERE ${where}`, params);
  return n;
}

/** Any value a JavaScript Date can parse, in the future; undefined means "now". */
export function parseSchedule(value: string | number | null | undefined): Date | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw badRequest('scheduledFor is not a date', 'INVALID_SCHEDULE');
  if (at.getTime() <= Date.now()) throw badRequest('scheduledFor must be in the future', 'INVALID_SCHEDULE');
  return at;
}

export async function listCampaigns(
  em: EntityManager,
  projectId: string,
  q: { page: number; pageSize: number; status?: CampaignStatus; search?: string; sort: string; dir: 'ASC' | 'DESC' },
) {
  const where = ['project_id = ?'];
  const params: unknown[] = [projectId];
  if (q.status) {
    where.push('status = ?');
    params.push(q.status);
  }
  if (q.search) {
    const like = `%${q.search.replace(/[\\%_]/g, (ch) => `\\${ch}`)}%`;
    where.push('(name ILIKE ? OR subject ILIKE ? OR from_email ILIKE ?)');
    params.push(like, like, like);
  }
  const filter = where.join(' AND ');
  const [{ n }] = await sql<{ n: number }>(em, `SELECT count(*)::int AS n FROM campaigns WHERE ${filter}`, params);
  const rows = await sql<CampaignRow>(em, `SELECT * FROM campaigns WHERE ${filter} ORDER BY ${q.sort} ${q.dir}, id ${q.dir} LIMIT ? OFFSET ?`, [
    ...params,
    q.pageSize,
    (q.page - 1) * q.pageSize,
  ]);
  return { data: rows.map(toCampaignDto), page: q.page, pageSize: q.pageSize, total: n, totalPages: Math.ceil(n / q.pageSize) };
}

/** Current counts, from the recipients' emails themselves. */
export async function campaignStats(em: EntityManager, c: CampaignRow) {
  const [s] = await sql<Record<string, number>>(
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
            coalesce(sum(open_count), 0)::int AS opens,
            coalesce(sum(click_count), 0)::int AS clicks
       FROM emails WHERE campaign_id = ?`,
    [c.id],
  );
  const rate = (n: number) => (s.sent ? Math.round((n / s.sent) * 10_000) / 100 : 0);
  return {
    campaignId: c.id,
    status: c.status,
    totalRecipients: c.total_recipients,
    ...s,
    openRate: rate(s.opened),
    clickRate: rate(s.clicked),
    bounceRate: rate(s.bounced),
    complaintRate: rate(s.complained),
  };
}

/**
 * The moment sending starts: SCHEDULED becomes SENDING, and the audience is fixed by queueing one
 * unrendered email per recipient (contacts who join later are not added). Idempotent: a second run
 * finds the audience fixed. Answers whether delivery should go on.
 */
export async function startCampaignSend(em: EntityManager, campaignId: string): Promise<{ proceed: boolean; recipients: number }> {
  return transaction(em, async (tx) => {
    const [c] = await sql<CampaignRow & { audience_fixed_at: Date | null }>(tx, `SELECT * FROM campaigns WHERE id = ? FOR UPDATE`, [campaignId]);
    if (!c || (c.status !== 'SCHEDULED' && c.status !== 'SENDING')) return { proceed: false, recipients: 0 };
    if (c.audience_fixed_at) return { proceed: true, recipients: c.total_recipients };
    // Checked when it was sent or scheduled; a scheduled one may find the month's emails used up since.
    const overLimit = await assertWithinBillingLimits(tx, c.project_id, () => audienceSize(tx, c)).then(
      () => false,
      (err) => (err instanceof AppError && err.code === 'BILLING_LIMIT_REACHED' ? true : Promise.reject(err)),
    );
    if (overLimit) {
      await sql(tx, `UPDATE campaigns SET status = 'CANCELLED', updated_at = now() WHERE id = ?`, [c.id]);
      return { proceed: false, recipients: 0 };
    }
    const params: unknown[] = [];
    const where = await audienceWhere(tx, c, params);
    const domain = c.from_email.slice(c.from_email.lastIndexOf('@') + 1);
    const inserted = await sql<{ n: number }>(
      tx,
      `WITH queued AS (
         INSERT INTO emails (id, project_id, contact_id, campaign_id, type, from_email, from_name, reply_to, to_email,
                             subject, html, text, headers, status, message_id)
         SELECT a.id, ?, a.contact_id, ?, ?, ?, ?, ?, a.email, ?, NULL, NULL, '{}'::jsonb, 'QUEUED', '<' || a.id || '@' || ? || '>'
         FROM (SELECT gen_random_uuid() AS id, c.id AS contact_id, c.email FROM contacts c WHERE ${where}) a
         ON CONFLICT (campaign_id, contact_id) WHERE campaign_id IS NOT NULL DO NOTHING
         RETURNING 1
       ) SELECT count(*)::int AS n FROM queued`,
      [c.project_id, c.id, c.type, c.from_email, c.from_name, c.reply_to ?? c.from_email, c.subject, domain, ...params],
    );
    await sql(tx, `UPDATE campaigns SET status = 'SENDING', audience_fixed_at = now(), total_recipients = ?, updated_at = now() WHERE id = ?`, [
      inserted[0].n,
      c.id,
    ]);
    return { proceed: true, recipients: inserted[0].n };
  });
}

/** SENT once every recipient is accounted for (sent, failed or cancelled). */
export async function completeCampaign(em: EntityManager, campaignId: string): Promise<boolean> {
  const rows = await sql(
    em,
    `UPDATE campaigns SET status = 'SENT', sent_at = now(), updated_at = now()
     WHERE id = ? AND status = 'SENDING' AND NOT EXISTS (SELECT 1 FROM emails WHERE campaign_id = ? AND status = 'QUEUED')
     RETURNING id`,
    [campaignId, campaignId],
  );
  return rows.length > 0;
}

/** After a cancel: whatever has not left is never sent. */
export async function cancelCampaignDelivery(em: EntityManager, campaignId: string): Promise<number> {
  return transaction(em, async (tx) => {
    await sql(tx, `UPDATE campaigns SET status = 'CANCELLED', updated_at = now() WHERE id = ? AND status IN ('SCHEDULED', 'SENDING')`, [campaignId]);
    const rows = await sql(
      tx,
      `UPDATE emails SET status = 'CANCELLED', claimed_until = NULL, last_error = 'campaign cancelled', updated_at = now()
       WHERE campaign_id = ? AND status = 'QUEUED' RETURNING id`,
      [campaignId],
    );
    return rows.length;
  });
}

/**
 * Sends a DRAFT campaign now or at `scheduledFor`, or moves a SCHEDULED one: checked (status, sender,
 * audience, billing), updated and started (or rescheduled) while the row is locked, so the workflow and
 * the row never disagree.
 */
export async function sendCampaign(
  em: EntityManager,
  temporal: TemporalClient,
  projectId: string,
  id: string,
  scheduledFor: Parameters<typeof parseSchedule>[0],
): Promise<CampaignRow> {
  return transaction(em, async (tx) => {
    const c = await getCampaign(tx, projectId, id, true);
    if (c.status !== 'DRAFT' && c.status !== 'SCHEDULED') {
      throw badRequest(`A ${c.status} campaign cannot be sent; only DRAFT or SCHEDULED campaigns can`, 'CAMPAIGN_NOT_SENDABLE');
    }
    const at = parseSchedule(scheduledFor);
    await assertVerifiedSender(tx, projectId, c.from_email);
    const recipients = await audienceSize(tx, c);
    if (recipients === 0) throw badRequest('The campaign’s audience has no subscribed contacts', 'NO_RECIPIENTS');
    // A send in a later billing period is checked when its time comes (startCampaignSend).
    if (!at || billingPeriod(at).start.getTime() === billingPeriod().start.getTime()) await assertWithinBillingLimits(tx, projectId, recipients);
    const [updated] = await sql<CampaignRow>(tx, `UPDATE campaigns SET status = ?, scheduled_for = ?, updated_at = now() WHERE id = ? RETURNING *`, [
      at ? 'SCHEDULED' : 'SENDING',
      at ?? null,
      id,
    ]);
    if (c.status === 'DRAFT') await startCampaignWorkflow(temporal, { id, projectId, scheduledFor: at ?? null });
    else await rescheduleCampaignWorkflow(temporal, id, at ?? null);
    return updated;
  });
}

/** Cancels a SCHEDULED or SENDING campaign and its workflow, with the row locked. */
export async function cancelCampaign(em: EntityManager, temporal: TemporalClient, projectId: string, id: string): Promise<CampaignRow> {
  return transaction(em, async (tx) => {
    const c = await getCampaign(tx, projectId, id, true);
    if (c.status !== 'SCHEDULED' && c.status !== 'SENDING') throw badRequest(`A ${c.status} campaign cannot be cancelled`, 'CAMPAIGN_NOT_CANCELLABLE');
    const [updated] = await sql<CampaignRow>(tx, `UPDATE campaigns SET status = 'CANCELLED', updated_at = now() WHERE id = ? RETURNING *`, [id]);
    await cancelCampaignWorkflow(temporal, id);
    return updated;
  });
}
