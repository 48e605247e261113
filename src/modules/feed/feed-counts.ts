import type { EntityManager } from '@mikro-orm/postgresql';
import { transaction } from '../../db/orm';
import { countRows, foldActivitySlice, foldContactSlice, rawEventCounts } from './feed.queries';

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
export function bucketCounts(
  em: EntityManager,
  projectId: string,
  source: CountSource,
  window: { from?: Date; to?: Date; names?: string[] },
  interval: Interval | 'all' = 'all',
): Promise<CountRow[]> {
  const dayAligned = (d?: Date) => !d || d.getTime() % DAY_MS === 0;
  return countRows(em, projectId, source, window, interval, interval !== 'hour' && dayAligned(window.from) && dayAligned(window.to));
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

/** Runs a fold (one slice per transaction, answering how many it moved) until a slice comes back short. */
async function foldInSlices(em: EntityManager, fold: (tx: EntityManager, slice: number) => Promise<number>, slice: number): Promise<number> {
  let folded = 0;
  for (;;) {
    const n = await transaction(em, (tx) => fold(tx, slice));
    folded += n;
    if (n < slice) return folded;
  }
}

/**
 * Folds pending deltas into the hourly and daily counts, and contact deltas into `contact_counts`, a
 * slice at a time; safe to run twice or concurrently (a delta is deleted by exactly one fold, in the
 * transaction that adds it). Deltas of deleted projects are dropped; counts that fall to zero stay
 * (readers skip them). Answers the number of deltas folded.
 */
export async function foldFeedCounts(em: EntityManager, slice = 20_000): Promise<number> {
  return (await foldInSlices(em, foldActivitySlice, slice)) + (await foldInSlices(em, foldContactSlice, slice));
}
