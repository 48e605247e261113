import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import type { CountRow, CountSource, Interval } from './feed-counts';

// The feed module's hand-written SQL: each statement says why the EntityManager does not make it.
// The reads are the measured hot paths of the activity and analytics pages (npm run bench:activity).

/**
 * SQL, an aggregate (hot read path): the hourly rows or, when `daily`, the daily rows, plus the deltas
 * not yet folded into them, summed by name, variant and bucket of `interval` (UTC) in one statement.
 */
export async function countRows(
  em: EntityManager,
  projectId: string,
  source: CountSource,
  window: { from?: Date; to?: Date; names?: string[] },
  interval: Interval | 'all',
  daily: boolean,
): Promise<CountRow[]> {
  const where = ['project_id = ?', 'source = ?'];
  const params: unknown[] = [projectId, source];
  if (window.from) {
    where.push('t >= ?');
    params.push(window.from);
  }
  if (window.to) {
    where.push('t < ?');
    params.push(window.to);
  }
  if (window.names) {
    where.push('name = ANY(?::text[])');
    params.push(window.names);
  }
  const filter = where.join(' AND ');
  const bucket = interval === 'all' ? `'epoch'::timestamptz` : `date_trunc('${interval}', t, 'UTC')`;
  const folded = daily
    ? `SELECT name, variant, day AS t, n, project_id, source FROM activity_counts_daily`
    : `SELECT name, variant, hour AS t, n, project_id, source FROM activity_counts`;
  const pending = `SELECT name, variant, ${daily ? `date_trunc('day', hour, 'UTC')` : 'hour'} AS t, n, project_id, source FROM activity_count_deltas`;
  const rows = await sql<{ name: string; variant: string; bucket: Date; n: string }>(
    em,
    `SELECT name, variant, ${bucket} AS bucket, sum(n) AS n FROM (
       SELECT name, variant, t, n FROM (${folded}) f WHERE ${filter}
       UNION ALL
       SELECT name, variant, t, n FROM (${pending}) p WHERE ${filter}
     ) c GROUP BY 1, 2, 3 HAVING sum(n) <> 0 ORDER BY 3, 1, 2`,
    [...params, ...params],
  );
  return rows.map((r) => ({ name: r.name, variant: r.variant, bucket: new Date(r.bucket), n: Number(r.n) }));
}

/** SQL, an aggregate over the events table (another module's) at a window's partial edge hours. */
export async function rawEventCounts(em: EntityManager, projectId: string, from: Date, to: Date, names?: string[]): Promise<CountRow[]> {
  const rows = await sql<{ name: string; variant: string; n: string }>(
    em,
    `SELECT name, CASE WHEN name = 'email.bounce' THEN lower(coalesce(data->>'bounceType', '')) ELSE '' END AS variant, count(*) AS n
     FROM events WHERE project_id = ? AND created_at >= ? AND created_at < ? ${names ? 'AND name = ANY(?::text[])' : ''} GROUP BY 1, 2`,
    names ? [projectId, from, to, names] : [projectId, from, to],
  );
  return rows.map((r) => ({ name: r.name, variant: r.variant, bucket: new Date(0), n: Number(r.n) }));
}

/**
 * SQL, one set-based statement: moves a slice of activity deltas (SKIP LOCKED, so concurrent folds
 * take different ones) into the hourly and daily counts, dropping those of deleted projects.
 * Answers how many deltas it moved.
 */
export async function foldActivitySlice(tx: EntityManager, slice: number): Promise<number> {
  const [row] = await sql<{ n: number }>(
    tx,
    `WITH moved AS (
       DELETE FROM activity_count_deltas WHERE id IN (
         SELECT id FROM activity_count_deltas ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING project_id, source, hour, name, variant, n),
     summed AS (
       SELECT project_id, source, hour, name, variant, sum(n) AS n FROM moved
       WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = moved.project_id)
       GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5),
     hourly AS (
       INSERT INTO activity_counts (project_id, source, hour, name, variant, n) SELECT * FROM summed
       ON CONFLICT (project_id, source, hour, name, variant) DO UPDATE SET n = activity_counts.n + EXCLUDED.n),
     daily AS (
       INSERT INTO activity_counts_daily (project_id, source, day, name, variant, n)
       SELECT project_id, source, date_trunc('day', hour, 'UTC'), name, variant, sum(n) FROM summed GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
       ON CONFLICT (project_id, source, day, name, variant) DO UPDATE SET n = activity_counts_daily.n + EXCLUDED.n)
     SELECT count(*)::int AS n FROM moved`,
    [slice],
  );
  return row.n;
}

/**
 * SQL, one set-based statement: moves a slice of contact deltas (another module's table) into
 * `contact_counts`, as the activity fold above. Only this fold writes contact_counts now; it adds to
 * shard 0 (the other shards hold what was counted before).
 */
export async function foldContactSlice(tx: EntityManager, slice: number): Promise<number> {
  const [row] = await sql<{ n: number }>(
    tx,
    `WITH moved AS (
       DELETE FROM contact_count_deltas WHERE id IN (
         SELECT id FROM contact_count_deltas ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
       RETURNING project_id, n),
     summed AS (
       SELECT project_id, sum(n) AS n FROM moved
       WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = moved.project_id) GROUP BY 1 ORDER BY 1),
     counted AS (
       INSERT INTO contact_counts (project_id, shard, n) SELECT project_id, 0, n FROM summed
       ON CONFLICT (project_id, shard) DO UPDATE SET n = contact_counts.n + EXCLUDED.n)
     SELECT count(*)::int AS n FROM moved`,
    [slice],
  );
  return row.n;
}

/** An event of the feed, with its contact's address. */
export interface FeedRow {
  id: string;
  name: string;
  contact_id: string;
  email: string;
  data: Record<string, unknown>;
  created_at: Date;
}

/**
 * SQL (hot read path): a page of the feed, newest first, over the events filter `where`; with
 * `types`, one index range per type merged by UNION ALL, then joined to the contacts' addresses.
 */
export function feedRows(em: EntityManager, filter: { where: string[]; params: unknown[] }, types: string[] | undefined, take: number): Promise<FeedRow[]> {
  const branch = (typed: boolean) =>
    `(SELECT id, name, contact_id, data, created_at FROM events WHERE ${filter.where.join(' AND ')}${typed ? ' AND name = ?' : ''}
      ORDER BY created_at DESC, id DESC LIMIT ?)`;
  const inner = types ? types.map(() => branch(true)).join(' UNION ALL ') : branch(false);
  const innerParams = types ? types.flatMap((t) => [...filter.params, t, take]) : [...filter.params, take];
  return sql<FeedRow>(
    em,
    `SELECT f.id, f.name, f.contact_id, c.email, f.data, f.created_at FROM (${inner}) f JOIN contacts c ON c.id = f.contact_id
     ORDER BY f.created_at DESC, f.id DESC LIMIT ?`,
    [...innerParams, take],
  );
}

/** SQL: the campaigns module's table, whose entity stays that module's own. */
export function scheduledCampaigns(em: EntityManager, projectId: string, limit: number) {
  return sql<{ id: string; name: string; subject: string; scheduled_for: Date; audience_type: string; segment_id: string | null }>(
    em,
    `SELECT id, name, subject, scheduled_for, audience_type, segment_id FROM campaigns
     WHERE project_id = ? AND status = 'SCHEDULED' ORDER BY scheduled_for, id LIMIT ?`,
    [projectId, limit],
  );
}

/** SQL: five tables of two other modules, the waiting step found by a LATERAL subquery, in one round trip. */
export function waitingExecutions(em: EntityManager, projectId: string, limit: number) {
  return sql<{
    id: string;
    workflow_id: string;
    workflow_name: string;
    contact_id: string;
    email: string;
    step_type: string | null;
    event_name: string | null;
    resume_at: Date | null;
    updated_at: Date;
  }>(
    em,
    `SELECT x.id, x.workflow_id, w.name AS workflow_name, x.contact_id, c.email, s.type AS step_type, ww.event_name, x.resume_at, x.updated_at
     FROM (SELECT * FROM workflow_executions WHERE project_id = ? AND status = 'WAITING' ORDER BY resume_at NULLS LAST, id LIMIT ?) x
     JOIN workflows w ON w.id = x.workflow_id
     JOIN contacts c ON c.id = x.contact_id
     LEFT JOIN workflow_waits ww ON ww.execution_id = x.id
     LEFT JOIN LATERAL (SELECT type FROM workflow_execution_steps WHERE execution_id = x.id AND status = 'WAITING' ORDER BY started_at DESC LIMIT 1) s ON true
     ORDER BY x.resume_at NULLS LAST, x.id`,
    [projectId, limit],
  );
}

/** SQL, two counts over other modules' tables in one round trip. */
export async function upcomingTotals(em: EntityManager, projectId: string): Promise<{ campaigns: number; executions: number }> {
  const [totals] = await sql<{ campaigns: number; executions: number }>(
    em,
    `SELECT (SELECT count(*)::int FROM campaigns WHERE project_id = ? AND status = 'SCHEDULED') AS campaigns,
            (SELECT count(*)::int FROM workflow_executions WHERE project_id = ? AND status = 'WAITING') AS executions`,
    [projectId, projectId],
  );
  return totals;
}
