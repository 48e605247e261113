import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

/** What `activity_counts` counts: recorded events by name, accepted emails by type. */
export type CountSource = 'event' | 'email';

export type Interval = 'hour' | 'day' | 'week' | 'month';

const HOUR_MS = 3_600_000;

export const floorHour = (d: Date): Date => new Date(Math.floor(d.getTime() / HOUR_MS) * HOUR_MS);
export const ceilHour = (d: Date): Date => new Date(Math.ceil(d.getTime() / HOUR_MS) * HOUR_MS);

export interface CountRow {
  name: string;
  variant: string;
  /** Start of the bucket (UTC). */
  bucket: Date;
  n: number;
}

/**
 * Counts in whole hours [from, to) (both rounded to the hour by the caller), grouped by name, variant
 * and bucket of `interval` (UTC). Folded counts and not yet folded deltas are added together, so the
 * answer is exact whether or not the fold has run.
 */
export async function hourlyCounts(
  em: EntityManager,
  projectId: string,
  source: CountSource,
  window: { from?: Date; to?: Date; names?: string[] },
  interval: Interval | 'all' = 'all',
): Promise<CountRow[]> {
  const where = ['project_id = ?', 'source = ?'];
  const params: unknown[] = [projectId, source];
  if (window.from) {
    where.push('hour >= ?');
    params.push(window.from);
  }
  if (window.to) {
    where.push('hour < ?');
    params.push(window.to);
  }
  if (window.names) {
    where.push('name = ANY(?::text[])');
    params.push(window.names);
  }
  const bucket = interval === 'all' ? `'epoch'::timestamptz` : `date_trunc('${interval}', hour, 'UTC')`;
  const filter = where.join(' AND ');
  const rows = await sql<{ name: string; variant: string; bucket: Date; n: string }>(
    em,
    `SELECT name, variant, ${bucket} AS bucket, sum(n) AS n FROM (
       SELECT name, variant, hour, n FROM activity_counts WHERE ${filter}
       UNION ALL
       SELECT name, variant, hour, n FROM activity_count_deltas WHERE ${filter}
     ) c GROUP BY 1, 2, 3 HAVING sum(n) <> 0 ORDER BY 3, 1, 2`,
    [...params, ...params],
  );
  return rows.map((r) => ({ name: r.name, variant: r.variant, bucket: new Date(r.bucket), n: Number(r.n) }));
}

/**
 * Exact event counts by name in [from, to): whole hours from the counts, the partial hours at either
 * edge straight from `events` (at most two hours of rows, read through the (project, created_at) index).
 */
export async function eventCountsBetween(
  em: EntityManager,
  projectId: string,
  from: Date,
  to: Date,
  names?: string[],
): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  const add = (name: string, n: number) => totals.set(name, (totals.get(name) ?? 0) + n);
  if (to <= from) return totals;
  const wholeFrom = ceilHour(from);
  const wholeTo = floorHour(to);
  const raw: Array<[Date, Date]> = [];
  if (wholeFrom < wholeTo) {
    for (const r of await hourlyCounts(em, projectId, 'event', { from: wholeFrom, to: wholeTo, names })) add(r.name, r.n);
    if (from < wholeFrom) raw.push([from, wholeFrom]);
    if (wholeTo < to) raw.push([wholeTo, to]);
  } else {
    raw.push([from, to]);
  }
  for (const [a, b] of raw) {
    const rows = await sql<{ name: string; n: string }>(
      em,
      `SELECT name, count(*) AS n FROM events WHERE project_id = ? AND created_at >= ? AND created_at < ?
       ${names ? 'AND name = ANY(?::text[])' : ''} GROUP BY name`,
      names ? [projectId, a, b, names] : [projectId, a, b],
    );
    for (const r of rows) add(r.name, Number(r.n));
  }
  return totals;
}

/** Emails accepted (queued for delivery) in [from, to), whole hours. */
export async function acceptedEmails(em: EntityManager, projectId: string, from: Date, to: Date): Promise<number> {
  const rows = await hourlyCounts(em, projectId, 'email', { from, to });
  return rows.reduce((sum, r) => sum + r.n, 0);
}

/**
 * Folds pending deltas into `activity_counts`, a slice at a time; safe to run twice or concurrently
 * (a delta is deleted by exactly one fold, in the transaction that adds it). Deltas of deleted projects
 * are dropped; counts that fall to zero stay (readers skip them). Answers the number of deltas folded.
 */
export async function foldActivityCounts(em: EntityManager, slice = 20_000): Promise<number> {
  let folded = 0;
  for (;;) {
    const [row] = await em.transactional((tx) =>
      sql<{ n: number }>(
        tx,
        `WITH moved AS (
           DELETE FROM activity_count_deltas WHERE id IN (
             SELECT id FROM activity_count_deltas ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED)
           RETURNING project_id, source, hour, name, variant, n),
         summed AS (
           SELECT project_id, source, hour, name, variant, sum(n) AS n FROM moved
           WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = moved.project_id)
           GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5),
         applied AS (
           INSERT INTO activity_counts (project_id, source, hour, name, variant, n) SELECT * FROM summed
           ON CONFLICT (project_id, source, hour, name, variant) DO UPDATE SET n = activity_counts.n + EXCLUDED.n)
         SELECT count(*)::int AS n FROM moved`,
        [slice],
      ),
    );
    folded += row.n;
    if (row.n < slice) return folded;
  }
}
