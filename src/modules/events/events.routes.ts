import type Router from '@koa/router';
import type { Context } from 'koa';
import { badRequest } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, queryValue, uuidParam } from '../../http/validate';
import { isUuid } from '../../db/ids';
import type { ActivityHub } from './contact-activity';
import { trackSchema } from './events.schemas';
import type { TrackBatcher } from './track-batcher';
import {
  assertContactInProject,
  deleteEventsByName,
  eventNames,
  eventStats,
  eventUsage,
  type EventListQuery,
  listEvents,
  trackEvent,
} from './events.service';

function dateParam(ctx: Context, name: string): Date | undefined {
  const raw = queryValue(ctx, name);
  if (!raw) return undefined;
  const d = new Date(raw);
  if (Number.isNaN(d.getTime())) throw badRequest(`${name} must be a date-time`, 'INVALID_PARAMETER');
  return d;
}

function eventListQuery(ctx: Context): Omit<EventListQuery, 'contactId'> {
  const limitRaw = Number.parseInt(queryValue(ctx, 'limit') ?? '', 10);
  const cursor = queryValue(ctx, 'cursor') || undefined;
  if (cursor && !isUuid(cursor)) throw badRequest('Invalid cursor', 'INVALID_CURSOR');
  return {
    limit: Number.isNaN(limitRaw) ? 20 : Math.min(100, Math.max(1, limitRaw)),
    cursor,
    name: queryValue(ctx, 'name') || queryValue(ctx, 'event') || undefined,
    since: dateParam(ctx, 'since'),
    until: dateParam(ctx, 'until'),
  };
}

export function eventRoutes(router: Router, g: Guards, { hub, batcher }: { hub: ActivityHub; batcher: TrackBatcher }): void {
  const track = async (ctx: Context) => {
    const input = body(ctx, trackSchema);
    const projectId = ctx.state.project!.id;
    const result = await trackEvent(ctx.state.em, batcher, projectId, input);
    hub.publish({ projectId, contactIds: [result.contactId], events: result.recorded });
    ctx.body = {
      success: true,
      data: { contact: result.contactId, event: result.event.id, timestamp: result.event.createdAt },
    };
  };
  router.post('/v1/track', g.public, g.idempotent, track);
  router.post('/events/track', g.secret, g.idempotent, track);

  router.get('/events', g.secret, async (ctx) => {
    ctx.body = await listEvents(ctx.state.em, ctx.state.project!.id, eventListQuery(ctx));
  });
  router.get('/events/stats', g.secret, async (ctx) => {
    ctx.body = await eventStats(ctx.state.em, ctx.state.project!.id);
  });
  router.get('/events/names', g.secret, async (ctx) => {
    ctx.body = { data: await eventNames(ctx.state.em, ctx.state.project!.id) };
  });
  router.get('/events/contact/:contactId', g.secret, async (ctx) => {
    const contactId = uuidParam(ctx, 'contactId');
    const projectId = ctx.state.project!.id;
    await assertContactInProject(ctx.state.em, projectId, contactId);
    ctx.body = await listEvents(ctx.state.em, projectId, { ...eventListQuery(ctx), contactId });
  });
  router.get('/events/:eventName/usage', g.secret, async (ctx) => {
    ctx.body = await eventUsage(ctx.state.em, ctx.state.project!.id, ctx.params.eventName);
  });
  router.delete('/events/:eventName', g.secret, async (ctx) => {
    ctx.body = await deleteEventsByName(ctx.state.em, ctx.state.project!.id, ctx.params.eventName);
  });
}
