import type Router from '@koa/router';
import type { Guards } from '../../http/guards';
import { query } from '../../http/validate';
import { activityFeedQuery, activityStatsQuery, recentCountQuery, upcomingQuery } from './activity.schemas';
import { activityFeed, activityStats, activityTypes, chartWindow, recentCount, upcoming } from './activity.service';

/** The project's activity feed and its counts (secret key). */
export function activityRoutes(router: Router, g: Guards): void {
  router.get('/activity', g.secret, async (ctx) => {
    ctx.body = await activityFeed(ctx.state.em, ctx.state.project!.id, query(ctx, activityFeedQuery));
  });
  router.get('/activity/stats', g.secret, async (ctx) => {
    const q = query(ctx, activityStatsQuery);
    ctx.body = await activityStats(ctx.state.em, ctx.state.project!.id, chartWindow(q), q.types);
  });
  router.get('/activity/recent-count', g.secret, async (ctx) => {
    const q = query(ctx, recentCountQuery);
    const now = new Date();
    ctx.body = await recentCount(ctx.state.em, ctx.state.project!.id, q.since ?? new Date(now.getTime() - q.minutes * 60_000), now);
  });
  router.get('/activity/types', g.secret, async (ctx) => {
    ctx.body = await activityTypes(ctx.state.em, ctx.state.project!.id);
  });
  router.get('/activity/upcoming', g.secret, async (ctx) => {
    ctx.body = await upcoming(ctx.state.em, ctx.state.project!.id, query(ctx, upcomingQuery).limit);
  });
}
