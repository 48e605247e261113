import { z } from 'zod';
import { emailSchema } from '../../http/validate';
import { dataMapSchema } from '../contacts/data-map';
import { isReservedEventName } from './event-names';

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
