import { z } from 'zod';
import { emailSchema } from '../../validation';
import { dataMapSchema } from '../contacts';
import { badRequest } from '../../errors';
import { queryDate, queryInt, queryText, queryUuid } from '../../http/query';
import { cursorList, dateTime, sameShape, successEnvelope } from '../../http/responses';
import { isReservedEventName } from './event-names';
import type { deleteEventsByName, eventNames, eventStats, eventUsage, listEvents } from './events.service';
import type { EventRecord } from './events.store';

export const eventNameSchema = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[^\p{Cc}]+$/u, 'Event names cannot contain control characters');

export const trackSchema = z.object({
  email: emailSchema,
  event: eventNameSchema.refine((name) => !isReservedEventName(name), {
    message: 'This event name is reserved for events the service emits itself',
    params: { code: 'reserved_event' },
  }),
  subscribed: z.boolean().optional(),
  data: dataMapSchema.optional(),
});

export type TrackInput = z.output<typeof trackSchema>;

/** GET /events and GET /events/contact/:contactId. */
export const eventListQuery = z.object({
  limit: queryInt({ default: 20, min: 1, max: 100 }),
  cursor: queryUuid(() => badRequest('Invalid cursor', 'INVALID_CURSOR'), 'The `cursor` of the previous page'),
  name: queryText({ description: 'Only events of this name' }),
  event: queryText({ description: 'The same as `name`, which wins when both are given' }),
  since: queryDate(() => badRequest('since must be a date-time', 'INVALID_PARAMETER'), 'Only events recorded at or after this time'),
  until: queryDate(() => badRequest('until must be a date-time', 'INVALID_PARAMETER'), 'Only events recorded before this time'),
});

export const trackResponse = successEnvelope(z.object({ contact: z.string(), event: z.string(), timestamp: dateTime }));

export const eventResponse = z.object({
  id: z.string(),
  name: z.string(),
  contactId: z.string(),
  data: z.record(z.string(), z.unknown()),
  createdAt: dateTime,
});
sameShape<z.output<typeof eventResponse>, EventRecord>(true);

export const eventListResponse = cursorList(eventResponse);
sameShape<z.output<typeof eventListResponse>, Awaited<ReturnType<typeof listEvents>>>(true);

const nameCount = z.object({ name: z.string(), count: z.number().int() });

export const eventStatsResponse = z.object({
  totalEvents: z.number().int(),
  last24Hours: z.number().int(),
  last7Days: z.number().int(),
  last30Days: z.number().int(),
  uniqueEventNames: z.number().int(),
  uniqueContacts: z.number().int(),
  topEvents: z.array(nameCount).meta({ description: 'The 10 most frequent names of the last 30 days' }),
});
sameShape<z.output<typeof eventStatsResponse>, Awaited<ReturnType<typeof eventStats>>>(true);

export const eventNamesResponse = z.object({ data: z.array(nameCount.extend({ lastTrackedAt: dateTime })) });
sameShape<z.output<typeof eventNamesResponse>['data'], Awaited<ReturnType<typeof eventNames>>>(true);

const usedBy = z.object({ id: z.string(), name: z.string() });
export const eventUsageResponse = z.object({
  eventName: z.string(),
  segments: z.array(usedBy),
  workflows: z.array(usedBy.extend({ usedAs: z.string().meta({ description: 'trigger, wait_for_event or condition' }) })),
  total: z.number().int(),
});
sameShape<z.output<typeof eventUsageResponse>, Awaited<ReturnType<typeof eventUsage>>>(true);

export const eventsDeletedResponse = z.object({ eventName: z.string(), deleted: z.number().int().meta({ description: 'How many events were deleted' }) });
sameShape<z.output<typeof eventsDeletedResponse>, Awaited<ReturnType<typeof deleteEventsByName>>>(true);
