import type { EntityManager } from '@mikro-orm/postgresql';
import { badRequest } from '../../errors';
import { SEGMENT_MEMBERSHIP, SYSTEM_EVENTS } from '../events';
import { eventPageFilter } from '../events';
import { bucketCounts, ceilHour, countsBetween, DAY_MS, floorHour, type Interval, sumByName } from './feed-counts';
import { feedRows, scheduledCampaigns, upcomingTotals, waitingExecutions } from './feed.queries';
import type { ActivityFeedQuery, WindowQuery } from './feed.schemas';

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

/**
 * The project's activity, newest first: every event the service or the client recorded (sends,
 * deliveries, opens, clicks, bounces, complaints, inbound mail, subscription changes, segment entries
 * and exits, custom events). With `types`, each type is read through its own index range and the
 * ranges merged, so a rare type is as fast to page through as a common one.
 */
export async function activityFeed(em: EntityManager, projectId: string, q: ActivityFeedQuery) {
  const filter = await eventPageFilter(em, projectId, q);
  const types = q.types ? [...new Set(q.types)] : undefined;
  const rows = await feedRows(em, filter, types, q.limit + 1);
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
  const campaigns = await scheduledCampaigns(em, projectId, limit);
  const executions = await waitingExecutions(em, projectId, limit);
  const totals = await upcomingTotals(em, projectId);
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
