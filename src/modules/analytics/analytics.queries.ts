import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import type { TOP_CAMPAIGN_METRICS } from '../feed';

// The analytics module's hand-written SQL: each statement says why the EntityManager does not make it.
// They read the campaigns module's table for its counters; its entity stays that module's own.

/** A campaign's counters, as the statements below read them. */
export interface CampaignStatsRow {
  id: string;
  name: string;
  subject: string;
  status: string;
  type: string;
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
}

const COLUMNS = `id, name, subject, status, type, total_recipients, sent_count, delivered_count, opened_count,
  clicked_count, bounced_count, complained_count, failed_count, sent_at, created_at`;

const METRIC_ORDER: Record<(typeof TOP_CAMPAIGN_METRICS)[number], string> = {
  sent: 'sent_count',
  delivered: 'delivered_count',
  opened: 'opened_count',
  clicked: 'clicked_count',
  bounced: 'bounced_count',
  complained: 'complained_count',
  openRate: 'opened_count::float8 / nullif(sent_count, 0)',
  clickRate: 'clicked_count::float8 / nullif(sent_count, 0)',
};

/** SQL: ranked by a counter or a rate computed in the ORDER BY, with NULLS LAST. */
export function topCampaignRows(
  em: EntityManager,
  projectId: string,
  q: { metric: (typeof TOP_CAMPAIGN_METRICS)[number]; limit: number; from?: Date; to?: Date },
): Promise<CampaignStatsRow[]> {
  const where = ['project_id = ?', 'sent_count > 0'];
  const params: unknown[] = [projectId];
  if (q.from) {
    where.push('sent_at >= ?');
    params.push(q.from);
  }
  if (q.to) {
    where.push('sent_at < ?');
    params.push(q.to);
  }
  return sql<CampaignStatsRow>(
    em,
    `SELECT ${COLUMNS} FROM campaigns WHERE ${where.join(' AND ')}
     ORDER BY ${METRIC_ORDER[q.metric]} DESC NULLS LAST, sent_at DESC NULLS LAST, id LIMIT ?`,
    [...params, q.limit],
  );
}

/** SQL: one campaign's counters, in the shape of the rows above and below. */
export async function campaignStatsRow(em: EntityManager, projectId: string, id: string): Promise<CampaignStatsRow | undefined> {
  const [row] = await sql<CampaignStatsRow>(em, `SELECT ${COLUMNS} FROM campaigns WHERE project_id = ? AND id = ?`, [projectId, id]);
  return row;
}

/** SQL: ordered by coalesce() over three dates, offset pages. */
export function campaignStatsPage(em: EntityManager, projectId: string, page: { limit: number; offset: number }): Promise<CampaignStatsRow[]> {
  return sql<CampaignStatsRow>(
    em,
    `SELECT ${COLUMNS} FROM campaigns WHERE project_id = ? AND status <> 'DRAFT'
     ORDER BY coalesce(sent_at, scheduled_for, created_at) DESC, id DESC LIMIT ? OFFSET ?`,
    [projectId, page.limit, page.offset],
  );
}

/** SQL, an aggregate: the campaigns past DRAFT and the sums of their counters. */
export async function campaignTotals(em: EntityManager, projectId: string): Promise<Record<string, number>> {
  const [sums] = await sql<Record<string, string>>(
    em,
    `SELECT count(*) AS campaigns, coalesce(sum(total_recipients), 0) AS recipients, coalesce(sum(sent_count), 0) AS sent,
       coalesce(sum(delivered_count), 0) AS delivered, coalesce(sum(opened_count), 0) AS opened, coalesce(sum(clicked_count), 0) AS clicked,
       coalesce(sum(bounced_count), 0) AS bounced, coalesce(sum(complained_count), 0) AS complained, coalesce(sum(failed_count), 0) AS failed
     FROM campaigns WHERE project_id = ? AND status <> 'DRAFT'`,
    [projectId],
  );
  return Object.fromEntries(Object.entries(sums).map(([k, v]) => [k, Number(v)]));
}
