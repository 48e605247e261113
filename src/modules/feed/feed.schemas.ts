import { z } from 'zod';
import { queryIsoDate, queryList } from '../../http/query';

const limit = (fallback: number, max: number) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .default(fallback)
    .transform((n) => Math.min(n, max));

const typeName = z.string().min(1).max(200);

/** GET /activity: newest first; `cursor` is the id of the last item of the previous page. */
export const activityFeedQuery = z.object({
  limit: limit(20, 100),
  cursor: z.uuid().optional(),
  types: queryList(typeName, 50).optional(),
  since: queryIsoDate.optional(),
  until: queryIsoDate.optional(),
});
export type ActivityFeedQuery = z.output<typeof activityFeedQuery>;

export const INTERVALS = ['hour', 'day', 'week', 'month'] as const;

/** A charted window: [from, to) in whole buckets of `interval` (UTC); default the last 30 days by day. */
export const windowQuery = z.object({
  from: queryIsoDate.optional(),
  to: queryIsoDate.optional(),
  interval: z.enum(INTERVALS).default('day'),
});
export type WindowQuery = z.output<typeof windowQuery>;

export const activityStatsQuery = windowQuery.extend({ types: queryList(typeName, 50).optional() });

/** GET /activity/recent-count: events since `since`, or in the last `minutes` (default 5, at most a day). */
export const recentCountQuery = z.object({
  since: queryIsoDate.optional(),
  minutes: z.coerce.number().int().min(1).max(1440).default(5),
});

export const upcomingQuery = z.object({ limit: limit(20, 100) });

export const TOP_CAMPAIGN_METRICS = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'openRate', 'clickRate'] as const;

export const topCampaignsQuery = z.object({
  metric: z.enum(TOP_CAMPAIGN_METRICS).default('opened'),
  limit: limit(5, 50),
  from: queryIsoDate.optional(),
  to: queryIsoDate.optional(),
});

export const campaignStatsQuery = z.object({
  page: z.coerce.number().int().min(1).default(1),
  pageSize: limit(20, 100),
  campaignId: z.uuid().optional(),
});

export const topEventsQuery = z.object({
  limit: limit(10, 50),
  from: queryIsoDate.optional(),
  to: queryIsoDate.optional(),
});
