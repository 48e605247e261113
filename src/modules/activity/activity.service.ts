import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { badRequest } from '../../http/errors';
import { SEGMENT_MEMBERSHIP, SYSTEM_EVENTS } from '../events';
import { eventPageFilter } from '../events';
import { bucketCounts, ceilHour, countsBetween, DAY_MS, floorHour, type Interval, sumByName } from './activity-counts';
import type { ActivityFeedQuery, WindowQuery } from './activity.schemas';

const MAX_BUCKETS = 1000;

/** Where an activity type comes from: the service's mail, subscription changes, segments, or the client. */
export function activityCategory(type: string): 'email' | 'contact' | 'segment' | 'custom' {
  if (type.startsWith('email.')) return 'email';
  if (type === SYSTEM_EVENTS.contactSubscribed || type === SYSTEM_EVENTS.contactUnsubscribed) return 'contact';
  if (SEGMENT_MEMBERSHIP.test(type)) return 'segment';
  return 'custom';
}

function truncate(d: Date, interval: Interval): Date {
  const day = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  switch (interval) {
    case 'hour':
      return floorHour(d);
    case 'day':
      return new Date(day);
    case 'week':
      // PostgreSQL's date_trunc('week'): Monday.
      return new Date(day - ((d.getUTCDay() + 6) % 7) * DAY_MS);
    case 'month':
      return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));
  }
}

function nextBucket(d: Date, interval: Interval): Date {
  if (interval === 'month') return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1));
  return new Date(d.getTime() + { hour: 3_600_000, day: DAY_MS, week: 7 * DAY_MS }[interval]);
}

export interface ChartWindow {
  from: Date;
  to: Date;
  interval: Interval;
  buckets: Date[];
}

/** The requested window widened to whole buckets (UTC); default the last 30 days. */
export function chartWindow(q: WindowQuery, now = new Date()): ChartWindow {
  const to = q.to ?? now;
  const from = q.from ?? new Date(to.getTime() - 30 * DAY_MS);
  if (from >= to) throw badRequest('from must be before to', 'INVALID_PARAMETER');
  const buckets: Date[] = [];
  for (let b = truncate(from, q.interval); b < to; b = nextBucket(b, q.interval)) {
    buckets.push(b);
    if (buckets.length > MAX_BUCKETS) {
      throw badRequest(`The window holds more than ${MAX_BUCKETS} ${q.interval}s; choose a longer interval or a shorter window`, 'INVALID_PARAMETER');
    }
  }
  return { from: buckets[0], to: nextBucket(buckets[buckets.length - 1], q.interval), interval: q.interval, buckets };
}

/** Per-bucket counts of the given event names over a chart window, zero buckets included. */
export async function eventSeries(em: EntityManager, projectId: string, w: ChartWindow, names?: string[]) {
  const rows = await bucketCounts(em, projectId, 'event', { from: w.from, to: w.to, names }, w.interval);
  const byBucket = new Map<number, Map<string, number>>(w.buckets.map((b) => [b.getTime(), new Map()]));
  const totals = new Map<string, number>();
  for (const r of rows) {
    const counts = byBucket.get(r.bucket.getTime());
    if (!counts) continue;
    counts.set(r.name, (counts.get(r.name) ?? 0) + r.n);
    totals.set(r.name, (totals.get(r.name) ?? 0) + r.n);
  }
  return { byBucket, totals };
}

interface FeedRow {
  id: string;
  name: string;
  contact_id: string;
  email: string;
  data: Record<string, unknown>;
  created_at: Date;
}

/**
 * The project's activity, newest first: every event the service or the client recorded (sends,
 * deliveries, opens, clicks, bounces, complaints, inbound mail, subscription changes, segment entries
 * and exits, custom events). With `types`, each type is read through its own index range and the
 * ranges merged, so a rare type is as fast to page through as a common one.
 */
export async function activityFeed(em: EntityManager, projectId: string, q: ActivityFeedQuery) {
  const { where, params } = await eventPageFilter(em, projectId, q);
  const types = q.types ? [...new Set(q.types)] : undefined;
  const branch = (typed: boolean) =>
    `(SELECT id, name, contact_id, data, created_at FROM events WHERE ${where.join(' AND ')}${typed ? ' AND name = ?' : ''}
      ORDER BY created_at DESC, id DESC LIMIT ?)`;
  const inner = types ? types.map(() => branch(true)).join(' UNION ALL ') : branch(false);
  const innerParams = types ? types.flatMap((t) => [...params, t, q.limit + 1]) : [...params, q.limit + 1];
  const rows = await sql<FeedRow>(
    em,
    `SELECT f.id, f.name, f.contact_id, c.email, f.data, f.created_at FROM (${inner}) f JOIN contacts c ON c.id = f.contact_id
     ORDER BY f.created_at DESC, f.id DESC LIMIT ?`,
    [...innerParams, q.limit + 1],
  );
  const page = rows.slice(0, q.limit);
  let total = 0;
  if (!q.cursor) {
    const rows = await countsBetween(em, projectId, 'event', q.since ?? new Date(0), q.until ?? ceilHour(new Date()), types);
    total = rows.reduce((sum, r) => sum + r.n, 0);
  }
  return {
    data: page.map((r) => ({
      id: r.id,
      type: r.name,
      category: activityCategory(r.name),
      contact: { id: r.contact_id, email: r.email },
      emailId: typeof r.data?.emailId === 'string' ? r.data.emailId : null,
      campaignId: typeof r.data?.campaignId === 'string' ? r.data.campaignId : null,
      data: r.data ?? {},
      createdAt: new Date(r.created_at).toISOString(),
    })),
    cursor: page.length ? page[page.length - 1].id : '',
    hasMore: rows.length > q.limit,
    total,
  };
}

/** Counts per type per bucket for charts, with totals. */
export async function activityStats(em: EntityManager, projectId: string, w: ChartWindow, types?: string[]) {
  const { byBucket, totals } = await eventSeries(em, projectId, w, types);
  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  return {
    from: w.from.toISOString(),
    to: w.to.toISOString(),
    interval: w.interval,
    total: sum(totals),
    totals: Object.fromEntries([...totals].sort((a, b) => b[1] - a[1])),
    series: w.buckets.map((b) => {
      const counts = byBucket.get(b.getTime())!;
      return { date: b.toISOString(), total: sum(counts), counts: Object.fromEntries(counts) };
    }),
  };
}

/** Events recorded in [since, now), exact to the microsecond. */
export async function recentCount(em: EntityManager, projectId: string, since: Date, now = new Date()) {
  const rows = await countsBetween(em, projectId, 'event', since, now);
  const count = rows.reduce((sum, r) => sum + r.n, 0);
  return { count, since: since.toISOString(), until: now.toISOString() };
}

/** Every type the project has recorded, most frequent first. */
export async function activityTypes(em: EntityManager, projectId: string) {
  const counts = sumByName(await bucketCounts(em, projectId, 'event', {}));
  return {
    data: [...counts]
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .map(([type, count]) => ({ type, category: activityCategory(type), count })),
  };
}

/** Scheduled campaigns by send time, and waiting automation executions by when they resume. */
export async function upcoming(em: EntityManager, projectId: string, limit: number) {
  const campaigns = await sql<{ id: string; name: string; subject: string; scheduled_for: Date; audience_type: string; segment_id: string | null }>(
    em,
    `SELECT id, name, subject, scheduled_for, audience_type, segment_id FROM campaigns
     WHERE project_id = ? AND status = 'SCHEDULED' ORDER BY scheduled_for, id LIMIT ?`,
    [projectId, limit],
  );
  const executions = await sql<{
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
  const [totals] = await sql<{ campaigns: number; executions: number }>(
    em,
    `SELECT (SELECT count(*)::int FROM campaigns WHERE project_id = ? AND status = 'SCHEDULED') AS campaigns,
            (SELECT count(*)::int FROM workflow_executions WHERE project_id = ? AND status = 'WAITING') AS executions`,
    [projectId, projectId],
  );
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    campaigns: campaigns.map((c) => ({
      id: c.id,
      name: c.name,
      subject: c.subject,
      scheduledFor: iso(c.scheduled_for),
      audienceType: c.audience_type,
      segmentId: c.segment_id,
    })),
    executions: executions.map((x) => ({
      id: x.id,
      workflowId: x.workflow_id,
      workflowName: x.workflow_name,
      contact: { id: x.contact_id, email: x.email },
      waitingFor: x.step_type === 'DELAY' ? 'delay' : x.event_name ? 'event' : 'step',
      eventName: x.event_name,
      resumeAt: iso(x.resume_at),
      waitingSince: iso(x.updated_at),
    })),
    totals,
  };
}
