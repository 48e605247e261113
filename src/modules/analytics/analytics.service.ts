import type { EntityManager } from '@mikro-orm/postgresql';
import { notFound } from '../../errors';
import { countsBetween, DAY_MS, sumByName } from '../feed';
import { type ChartWindow, eventSeries } from '../feed';
import type { TOP_CAMPAIGN_METRICS } from '../feed';
import { isReservedEventName } from '../events';
import { campaignStatsPage, campaignStatsRow, type CampaignStatsRow, campaignTotals, topCampaignRows } from './analytics.queries';

/** The mail metrics of the time series, and the event each counts (every event, not distinct emails). */
const SERIES_EVENTS = {
  sent: 'email.sent',
  delivered: 'email.delivery',
  opened: 'email.open',
  clicked: 'email.click',
  bounced: 'email.bounce',
  complained: 'email.complaint',
} as const;

type SeriesMetric = keyof typeof SERIES_EVENTS;

export async function mailTimeseries(em: EntityManager, projectId: string, w: ChartWindow) {
  const { byBucket, totals } = await eventSeries(em, projectId, w, Object.values(SERIES_EVENTS));
  const metrics = (counts: Map<string, number>) =>
    Object.fromEntries(Object.entries(SERIES_EVENTS).map(([metric, name]) => [metric, counts.get(name) ?? 0])) as Record<SeriesMetric, number>;
  return {
    from: w.from.toISOString(),
    to: w.to.toISOString(),
    interval: w.interval,
    totals: metrics(totals),
    data: w.buckets.map((b) => ({ date: b.toISOString(), ...metrics(byBucket.get(b.getTime())!) })),
  };
}

const rate = (n: number, of: number) => (of > 0 ? Math.round((n / of) * 10_000) / 10_000 : 0);

/** Counters are of distinct emails (an email opened twice is one open); rates are of emails sent. */
function campaignBreakdown(r: CampaignStatsRow) {
  return {
    id: r.id,
    name: r.name,
    subject: r.subject,
    status: r.status,
    type: r.type,
    sentAt: r.sent_at ? new Date(r.sent_at).toISOString() : null,
    recipients: r.total_recipients,
    sent: r.sent_count,
    delivered: r.delivered_count,
    opened: r.opened_count,
    clicked: r.clicked_count,
    bounced: r.bounced_count,
    complained: r.complained_count,
    failed: r.failed_count,
    openRate: rate(r.opened_count, r.sent_count),
    clickRate: rate(r.clicked_count, r.sent_count),
    bounceRate: rate(r.bounced_count, r.sent_count),
    complaintRate: rate(r.complained_count, r.sent_count),
  };
}

/** Campaigns that have sent, best first by `metric`; `from`/`to` filter on when sending started. */
export async function topCampaigns(
  em: EntityManager,
  projectId: string,
  q: { metric: (typeof TOP_CAMPAIGN_METRICS)[number]; limit: number; from?: Date; to?: Date },
) {
  const rows = await topCampaignRows(em, projectId, q);
  return { metric: q.metric, data: rows.map(campaignBreakdown) };
}

/** Every campaign past DRAFT with its breakdown, newest first (offset pages), and the project's totals. */
export async function campaignStats(em: EntityManager, projectId: string, q: { page: number; pageSize: number; campaignId?: string }) {
  if (q.campaignId) {
    const row = await campaignStatsRow(em, projectId, q.campaignId);
    if (!row) throw notFound('Campaign');
    return { data: [campaignBreakdown(row)], total: 1, page: 1, pageSize: 1 };
  }
  const rows = await campaignStatsPage(em, projectId, { limit: q.pageSize, offset: (q.page - 1) * q.pageSize });
  const n = await campaignTotals(em, projectId);
  return {
    data: rows.map(campaignBreakdown),
    total: n.campaigns,
    page: q.page,
    pageSize: q.pageSize,
    summary: {
      recipients: n.recipients,
      sent: n.sent,
      delivered: n.delivered,
      opened: n.opened,
      clicked: n.clicked,
      bounced: n.bounced,
      complained: n.complained,
      failed: n.failed,
      openRate: rate(n.opened, n.sent),
      clickRate: rate(n.clicked, n.sent),
    },
  };
}

/** The client's own event names by how often they were tracked in [from, to) (default the last 30 days). */
export async function topEvents(em: EntityManager, projectId: string, q: { limit: number; from?: Date; to?: Date }, now = new Date()) {
  const to = q.to ?? now;
  const from = q.from ?? new Date(to.getTime() - 30 * DAY_MS);
  const counts = sumByName(await countsBetween(em, projectId, 'event', from, to));
  const ranked = [...counts].filter(([name, n]) => n > 0 && !isReservedEventName(name)).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return {
    from: from.toISOString(),
    to: to.toISOString(),
    distinct: ranked.length,
    data: ranked.slice(0, q.limit).map(([name, count]) => ({ name, count })),
  };
}
