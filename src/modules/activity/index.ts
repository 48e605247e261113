/** The activity module's public surface: the only file other modules import. */
export { ActivityCountDailySchema, ActivityCountDeltaSchema, ActivityCountSchema } from './activity-counts.entity';
export { campaignStatsQuery, topCampaignsQuery, topEventsQuery, windowQuery } from './activity.schemas';
export type { TOP_CAMPAIGN_METRICS } from './activity.schemas';
export { DAY_MS, bucketCounts, ceilHour, countsBetween, foldActivityCounts, sumByName } from './activity-counts';
export type { CountRow } from './activity-counts';
export { chartWindow, eventSeries } from './activity.service';
export type { ChartWindow } from './activity.service';
export { activityRoutes } from './activity.routes';
