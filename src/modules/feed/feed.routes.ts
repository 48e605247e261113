import type Router from '@koa/router';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { activityFeedQuery, activityStatsQuery, recentCountQuery, upcomingQuery } from './feed.schemas';
import { activityFeed, activityStats, activityTypes, chartWindow, recentCount, upcoming } from './feed.service';

const tag = 'Activity';
const BAD_PARAMETER = { 400: 'A query parameter is not valid (INVALID_PARAMETER, naming it)' };

/** The project's activity feed and its counts (secret key). */
export function feedRoutes(router: Router, g: Guards): void {
  router.get(
    '/activity',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'The project’s activity, newest first',
        description:
          'Every recorded event (sends, deliveries, opens, clicks, bounces, complaints, ' +
          'inbound, subscription changes, segment entries and exits, custom events) as a cursor list; `total` on the first page only.',
        query: activityFeedQuery,
        responses: { 200: '`{ data: [{ id, type, category, contact, emailId, campaignId, data, createdAt }], cursor, hasMore, total }`' },
        errors: { 400: 'A query parameter is not valid (INVALID_PARAMETER), or the cursor is unknown (INVALID_CURSOR)' },
      },
      async (ctx, input) => {
        ctx.body = await activityFeed(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );
  router.get(
    '/activity/stats',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Counts per type per bucket, for charts',
        query: activityStatsQuery,
        responses: { 200: '`{ from, to, interval, total, totals, series: [{ date, total, counts }] }`' },
        errors: BAD_PARAMETER,
      },
      async (ctx, input) => {
        const q = input.query();
        ctx.body = await activityStats(ctx.state.em, ctx.state.project!.id, chartWindow(q), q.types);
      },
    ),
  );
  router.get(
    '/activity/recent-count',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'How many events were recorded recently',
        query: recentCountQuery,
        responses: { 200: '`{ count, since, until }`' },
        errors: BAD_PARAMETER,
      },
      async (ctx, input) => {
        const q = input.query();
        const now = new Date();
        ctx.body = await recentCount(ctx.state.em, ctx.state.project!.id, q.since ?? new Date(now.getTime() - q.minutes * 60_000), now);
      },
    ),
  );
  router.get(
    '/activity/types',
    g.secret,
    endpoint(
      { tag, summary: 'Every activity type the project has, by frequency', responses: { 200: '`{ data: [{ type, category, count }] }`' } },
      async (ctx) => {
        ctx.body = await activityTypes(ctx.state.em, ctx.state.project!.id);
      },
    ),
  );
  router.get(
    '/activity/upcoming',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Scheduled campaigns and waiting automation executions',
        query: upcomingQuery,
        responses: { 200: '`{ campaigns: [...], executions: [{ ..., waitingFor, eventName, resumeAt }], totals }`' },
        errors: BAD_PARAMETER,
      },
      async (ctx, input) => {
        ctx.body = await upcoming(ctx.state.em, ctx.state.project!.id, input.query().limit);
      },
    ),
  );
}
