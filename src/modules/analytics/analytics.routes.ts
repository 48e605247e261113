import type Router from '@koa/router';
import type { Guards } from '../../http/guards';
import { query } from '../../http/validate';
import { campaignStatsQuery, topCampaignsQuery, topEventsQuery, windowQuery } from '../activity/activity.schemas';
import { chartWindow } from '../activity/activity.service';
import { campaignStats, mailTimeseries, topCampaigns, topEvents } from './analytics.service';

/** Mail and campaign analytics (secret key). */
export function analyticsRoutes(router: Router, g: Guards): void {
  router.get('/analytics/timeseries', g.secret, async (ctx) => {
    ctx.body = await mailTimeseries(ctx.state.em, ctx.state.project!.id, chartWindow(query(ctx, windowQuery)));
  });
  router.get('/analytics/top-campaigns', g.secret, async (ctx) => {
    ctx.body = await topCampaigns(ctx.state.em, ctx.state.project!.id, query(ctx, topCampaignsQuery));
  });
  router.get('/analytics/campaign-stats', g.secret, async (ctx) => {
    ctx.body = await campaignStats(ctx.state.em, ctx.state.project!.id, query(ctx, campaignStatsQuery));
  });
  router.get('/analytics/top-events', g.secret, async (ctx) => {
    ctx.body = await topEvents(ctx.state.em, ctx.state.project!.id, query(ctx, topEventsQuery));
  });
}
