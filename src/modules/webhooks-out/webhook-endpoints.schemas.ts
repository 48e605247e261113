import { z } from 'zod';
import { queryEnum, queryInt, queryUuid } from '../../http/query';
import { simpleBadRequest } from '../../errors';
import { cursorList, dateTime, sameShape } from '../../http/responses';
import type { listDeliveries, toEndpointDto } from './webhook-endpoints.service';

const url = z
  .string()
  .trim()
  .max(2048)
  .refine(
    (v) => {
      try {
        const u = new URL(v);
        return u.protocol === 'http:' || u.protocol === 'https:';
      } catch {
        return false;
      }
    },
    { message: 'Must be an http or https URL', params: { code: 'invalid_string' } },
  );

/** An event name (`email.delivery`, a custom one) or a prefix pattern (`email.*`). */
const eventPattern = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^[^\s*]+(\.\*)?$/, 'An event name, or a prefix followed by .* (email.*); omit the list for every event');

const events = z.array(eventPattern).max(100).nullable().meta({ description: 'Event names or `prefix.*` patterns; null or omitted: every event' });

export const createEndpointSchema = z.object({
  url,
  events: events.optional(),
  description: z.string().max(500).nullable().optional(),
  enabled: z.boolean().optional(),
});

export const patchEndpointSchema = createEndpointSchema.partial();

export const endpointResponse = z.object({
  id: z.string(),
  url: z.string(),
  events: z.array(z.string()).nullable(),
  description: z.string().nullable(),
  enabled: z.boolean(),
  disabledReason: z.string().nullable().meta({ description: 'Why the service disabled it (410 Gone, failing for 5 days)' }),
  secret: z.string().optional().meta({ description: '`whsec_…`: shown on creation and rotation only' }),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof endpointResponse>, ReturnType<typeof toEndpointDto>>(true);

export const deliveryStatus = ['PENDING', 'SUCCEEDED', 'FAILED'] as const;

export const deliveryListQuery = z.object({
  limit: queryInt({ default: 20, min: 1, max: 100 }),
  cursor: queryUuid(() => simpleBadRequest('Invalid cursor'), 'The `cursor` of the previous page'),
  status: queryEnum(deliveryStatus, () => simpleBadRequest(`status must be one of ${deliveryStatus.join(', ')}`)),
});

export const deliveryResponse = z.object({
  id: z.string().meta({ description: 'Sent as `webhook-id`, the same on every attempt' }),
  eventType: z.string(),
  status: z.enum(deliveryStatus),
  attempts: z.number().int(),
  lastStatusCode: z.number().int().nullable(),
  lastError: z.string().nullable(),
  nextAttemptAt: dateTime.nullable(),
  createdAt: dateTime,
  deliveredAt: dateTime.nullable(),
});

export const deliveryListResponse = cursorList(deliveryResponse);
sameShape<z.output<typeof deliveryListResponse>, Awaited<ReturnType<typeof listDeliveries>>>(true);
