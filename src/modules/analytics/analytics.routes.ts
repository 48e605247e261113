import type Router from '@koa/router';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { campaignStatsQuery, topCampaignsQuery, topEventsQuery, windowQuery } from '../feed';
import { chartWindow } from '../feed';
import { campaignStats, mailTimeseries, topCampaigns, topEvents } from './analytics.service';

const tag = 'Analytics';
const BAD_PARAMETER = { 400: 'A query parameter is not valid (INVALID_PARAMETER, naming it)' };

/** Mail and campaign analytics (secret key). */
export function analyticsRoutes(router: Router, g: Guards): void {
  router.get(
    '/analytics/timeseries',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Sent, delivered, opened, clicked, bounced and complained per bucket',
        query: windowQuery,
        responses: { 200: '`{ from, to, interval, totals, data: [{ date, sent, delivered, opened, clicked, bounced, complained }] }`' },
        errors: BAD_PARAMETER,
      },
      async (ctx, input) => {
        ctx.body = await mailTimeseries(ctx.state.em, ctx.state.project!.id, chartWindow(input.query()));
      },
    ),
  );
  router.get(
    '/analytics/top-campaigns',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Campaigns that have sent, best first by a metric',
        query: topCampaignsQuery,
        responses: { 200: '`{ metric, data: [campaign breakdown] }`' },
        errors: BAD_PARAMETER,
      },
      async (ctx, input) => {
        ctx.body = await topCampaigns(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );
  router.get(
    '/analytics/campaign-stats',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Every campaign past DRAFT with its counts and rates, or one campaign',
        query: campaignStatsQuery,
        responses: {
          200:
            '`{ data: [{ id, name, status, recipients, sent, delivered, opened, ' +
            'clicked, bounced, complained, failed, openRate, clickRate, ... }], total, page, pageSize, summary }`',
        },
        errors: { ...BAD_PARAMETER, 404: 'No such campaign in the project' },
      },
      async (ctx, input) => {
        ctx.body = await campaignStats(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );
  router.get(
    '/analytics/top-events',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'The client’s own event names by frequency',
        query: topEventsQuery,
        responses: { 200: '`{ from, to, distinct, data: [{ name, count }] }`' },
        errors: BAD_PARAMETER,
      },
      async (ctx, input) => {
        ctx.body = await topEvents(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );
}
