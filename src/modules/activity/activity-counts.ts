import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, transaction } from '../../db/orm';

/** What the counts count: recorded events by name, accepted emails by type. */
export type CountSource = 'event' | 'email';

export type Interval = 'hour' | 'day' | 'week' | 'month';

const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;

export const floorHour = (d: Date): Date => new Date(Math.floor(d.getTime() / HOUR_MS) * HOUR_MS);
export const ceilHour = (d: Date): Date => new Date(Math.ceil(d.getTime() / HOUR_MS) * HOUR_MS);
const floorDay = (d: Date): Date => new Date(Math.floor(d.getTime() / DAY_MS) * DAY_MS);
const ceilDay = (d: Date): Date => new Date(Math.ceil(d.getTime() / DAY_MS) * DAY_MS);

export interface CountRow {
  name: string;
  variant: string;
  /** Start of the bucket (UTC); the epoch when not bucketed. */
  bucket: Date;
  n: number;
}

/**
 * Counts over [from, to), grouped by name, variant and bucket of `interval` (UTC), from the hourly
 * rows (`from`/`to` on whole hours) or, for day-aligned windows bucketed by day or longer, the daily
 * rows. Folded counts and not yet folded deltas are added together, so the answer is exact whether or
 * not the fold has run.
 */
export async function bucketCounts(
  em: EntityManager,
  projectId: string,
  source: CountSource,
  window: { from?: Date; to?: Date; names?: string[] },
  interval: Interval | 'all' = 'all',
): Promise<CountRow[]> {
  const dayAligned = (d?: Date) => !d || d.getTime() % DAY_MS === 0;
  const daily = interval !== 'hour' && dayAligned(window.from) && dayAligned(window.to);
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

/** Sums rows by name (variants together), or by `name:variant` when `byVariant`. */
export function sumByName(rows: CountRow[], byVariant = false): Map<string, number> {
  const totals = new Map<string, number>();
  for (const r of rows) {
    const k = byVariant && r.variant ? `${r.name}:${r.variant}` : r.name;
    totals.set(k, (totals.get(k) ?? 0) + r.n);
  }
  return totals;
}

/**
 * Exact counts in [from, to): whole days from the daily rows, whole hours at either side from the
 * hourly rows, and (events only) the partial hours at the very edges straight from `events`, at most
 * two hours of rows read through the (project, created_at) index. Accepted emails are counted in
 * whole hours (the window widened to them).
 */
export async function countsBetween(em: EntityManager, projectId: string, source: CountSource, from: Date, to: Date, names?: string[]): Promise<CountRow[]> {
  const rows: CountRow[] = [];
  if (source === 'email') [from, to] = [floorHour(from), ceilHour(to)];
  if (to <= from) return rows;
  const h0 = ceilHour(from);
  const h1 = floorHour(to);
  if (h0 >= h1) return rawEventCounts(em, projectId, from, to, names);
  const d0 = ceilDay(h0);
  const d1 = floorDay(h1);
  const ranges: Array<[Date, Date]> =
    d0 < d1
      ? [
          [h0, d0],
          [d0, d1],
          [d1, h1],
        ]
      : [[h0, h1]];
  for (const [a, b] of ranges) if (a < b) rows.push(...(await bucketCounts(em, projectId, source, { from: a, to: b, names })));
  if (source === 'event') {
    if (from < h0) rows.push(...(await rawEventCounts(em, projectId, from, h0, names)));
    if (h1 < to) rows.push(...(await rawEventCounts(em, projectId, h1, to, names)));
  }
  return rows;
}

async function rawEventCounts(em: EntityManager, projectId: string, from: Date, to: Date, names?: string[]): Promise<CountRow[]> {
  const rows = await sql<{ name: string; variant: string; n: string }>(
    em,
    `SELECT name, CASE WHEN name = 'email.bounce' THEN lower(coalesce(data->>'bounceType', '')) ELSE '' END AS variant, count(*) AS n
     FROM events WHERE project_id = ? AND created_at >= ? AND created_at < ? ${names ? 'AND name = ANY(?::text[])' : ''} GROUP BY 1, 2`,
    names ? [projectId, from, to, names] : [projectId, from, to],
  );
  return rows.map((r) => ({ name: r.name, variant: r.variant, bucket: new Date(0), n: Number(r.n) }));
}

/** Runs a fold statement (one slice per transaction, answering `n` moved) until a slice comes back short. */
async function foldInSlices(em: EntityManager, statement: string, slice: number): Promise<number> {
  let folded = 0;
  for (;;) {
    const [row] = await transaction(em, (tx) => sql<{ n: number }>(tx, statement, [slice]));
    folded += row.n;
    if (row.n < slice) return folded;
  }
}

/**
 * Folds pending deltas into the hourly and daily counts, and contact deltas into `contact_counts`, a
 * slice at a time; safe to run twice or concurrently (a delta is deleted by exactly one fold, in the
 * transaction that adds it). Deltas of deleted projects are dropped; counts that fall to zero stay
 * (readers skip them). Answers the number of deltas folded.
 */
export async function foldActivityCounts(em: EntityManager, slice = 20_000): Promise<number> {
  const activity = await foldInSlices(
    em,
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
    slice,
  );
  const contacts = await foldInSlices(
    em,
    // Only this fold writes contact_counts now; it adds to shard 0 (the other shards hold what was counted before).
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
    slice,
  );
  return activity + contacts;
}
