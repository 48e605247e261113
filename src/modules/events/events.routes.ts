import type Router from '@koa/router';
import { z } from 'zod';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { uuidPath } from '../../validation';
import type { ActivityHub } from '../../bus/contact-activity';
import {
  eventListQuery,
  eventListResponse,
  eventNamesResponse,
  eventsDeletedResponse,
  eventStatsResponse,
  eventUsageResponse,
  trackResponse,
  trackSchema,
} from './events.schemas';
import type { TrackBatcher } from './track-batcher';
import { assertContactInProject, deleteEventsByName, eventNames, eventStats, eventUsage, listEvents, trackEvent } from './events.service';

const LIST_ERRORS = { 400: 'An invalid cursor (INVALID_CURSOR), or since or until not a date-time (INVALID_PARAMETER)' };

const listFilter = ({ event, ...q }: z.output<typeof eventListQuery>) => ({ ...q, name: q.name ?? event });

export function eventRoutes(router: Router, g: Guards, { hub, batcher }: { hub: ActivityHub; batcher: TrackBatcher }): void {
  const track = (summary: string, internal: boolean) =>
    endpoint(
      {
        tag: 'Events',
        summary,
        internal,
        description: 'Upserts the contact (subscribed by default when new), then records the event. Without an Idempotency-Key, each call records a new event.',
        body: trackSchema,
        responses: { 200: trackResponse.describe('The contact and event ids') },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const result = await trackEvent(ctx.state.em, batcher, projectId, input.body());
        hub.publish({ projectId, contactIds: [result.contactId], events: result.recorded });
        ctx.body = {
          success: true,
          data: { contact: result.contactId, event: result.event.id, timestamp: result.event.createdAt },
        };
      },
    );
  router.post('/v1/track', g.public, g.idempotent, track('Track an event for a contact', false));
  router.post('/events/track', g.secret, g.idempotent, track('Track an event: the dashboard’s alias of POST /v1/track', true));

  router.get(
    '/events',
    g.secret,
    endpoint(
      {
        tag: 'Events',
        summary: 'List tracked events, newest first',
        query: eventListQuery,
        responses: { 200: eventListResponse.describe('A cursor page of events') },
        errors: LIST_ERRORS,
      },
      async (ctx, input) => {
        ctx.body = await listEvents(ctx.state.em, ctx.state.project!.id, listFilter(input.query()));
      },
    ),
  );

  router.get(
    '/events/stats',
    g.secret,
    endpoint(
      { tag: 'Events', summary: 'Aggregated event statistics', responses: { 200: eventStatsResponse.describe('Counts over time windows') } },
      async (ctx) => {
        ctx.body = await eventStats(ctx.state.em, ctx.state.project!.id);
      },
    ),
  );

  router.get(
    '/events/names',
    g.secret,
    endpoint(
      { tag: 'Events', summary: 'Distinct event names in the project', responses: { 200: eventNamesResponse.describe('Most frequent first') } },
      async (ctx) => {
        ctx.body = { data: await eventNames(ctx.state.em, ctx.state.project!.id) };
      },
    ),
  );

  router.get(
    '/events/contact/:contactId',
    g.secret,
    endpoint(
      {
        tag: 'Events',
        summary: 'All events of one contact',
        params: { contactId: uuidPath },
        query: eventListQuery,
        responses: { 200: eventListResponse.describe('A cursor page of the contact’s events') },
        errors: { ...LIST_ERRORS, 404: 'The contact is not in the project' },
      },
      async (ctx, input) => {
        const contactId = input.param('contactId');
        const projectId = ctx.state.project!.id;
        await assertContactInProject(ctx.state.em, projectId, contactId);
        ctx.body = await listEvents(ctx.state.em, projectId, { ...listFilter(input.query()), contactId });
      },
    ),
  );

  const eventName = z.string().meta({ description: 'An event name (URL-encoded)' });

  router.get(
    '/events/:eventName/usage',
    g.secret,
    endpoint(
      {
        tag: 'Events',
        summary: 'Where an event name is referenced',
        description: 'Segment conditions, workflow triggers, and WAIT_FOR_EVENT and CONDITION steps.',
        params: { eventName },
        responses: { 200: eventUsageResponse.describe('The referencing segments and workflows') },
      },
      async (ctx, input) => {
        ctx.body = await eventUsage(ctx.state.em, ctx.state.project!.id, input.param('eventName'));
      },
    ),
  );

  router.delete(
    '/events/:eventName',
    g.secret,
    endpoint(
      {
        tag: 'Events',
        summary: 'Delete every event with that name',
        params: { eventName },
        responses: { 200: eventsDeletedResponse.describe('How many were deleted') },
        errors: { 400: 'The name is one the service records itself (RESERVED_EVENT)' },
      },
      async (ctx, input) => {
        ctx.body = await deleteEventsByName(ctx.state.em, ctx.state.project!.id, input.param('eventName'));
      },
    ),
  );
}
