/** The feed module's public surface: the only file other modules import. */
export { ActivityCountDailySchema, ActivityCountDeltaSchema, ActivityCountSchema } from './feed-counts.entity';
export { campaignStatsQuery, topCampaignsQuery, topEventsQuery, windowQuery } from './feed.schemas';
export type { TOP_CAMPAIGN_METRICS } from './feed.schemas';
export { DAY_MS, bucketCounts, ceilHour, countsBetween, foldFeedCounts, sumByName } from './feed-counts';
export type { CountRow } from './feed-counts';
export { chartWindow, eventSeries } from './feed.service';
export type { ChartWindow } from './feed.service';
export { feedRoutes } from './feed.routes';
