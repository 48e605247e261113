import { z } from 'zod';
import { dateTime, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import { dataMapSchema } from '../contacts';
import type { consentOf } from './consent.service';
import { HONEYPOT_FIELD } from './subscribe-form';

/** A form sends one `topics` field per checked box: one is a string, several an array. */
const topicList = z.preprocess(
  (v) => (typeof v === 'string' ? [v] : v),
  z
    .array(z.uuid({ message: 'topics must hold topic ids (UUIDs)' }))
    .max(50)
    .meta({ description: 'Topic ids to join; none: the global subscription' }),
);

export const subscribeSchema = z.object({
  email: emailSchema,
  topics: topicList.optional(),
  data: dataMapSchema.optional().meta({ description: 'Contact data, stored only on a contact this request creates' }),
  [HONEYPOT_FIELD]: z
    .string()
    .max(1000)
    .optional()
    .meta({ description: 'Honeypot: leave empty and hidden; a filled one is answered as a success and ignored' }),
});
export type SubscribeInput = z.output<typeof subscribeSchema>;

export const subscribeQuery = z.object({
  key: z.string().optional().meta({ description: 'The public key, for an HTML form (which cannot set headers)' }),
});

export const consentRecord = z.object({
  id: z.string(),
  status: z.enum(['pending', 'confirmed', 'expired']),
  source: z.string().meta({ description: 'What asked for the confirmation: subscribe_form, api (PATCH /contacts/:id) or import' }),
  topicIds: z.array(z.string()),
  subscribeAll: z.boolean().meta({ description: 'Confirming also sets the contact’s global subscribed' }),
  requestedAt: dateTime,
  requestedIp: z.string().nullable(),
  requestedUserAgent: z.string().nullable(),
  mailedAt: dateTime.nullable().meta({ description: 'When the confirmation mail was queued; null when none was sent' }),
  expiresAt: dateTime,
  confirmedAt: dateTime.nullable(),
  confirmedIp: z.string().nullable(),
  confirmedUserAgent: z.string().nullable(),
});
export const consentResponse = z.object({ data: z.array(consentRecord) });
sameShape<z.output<typeof consentResponse>, Awaited<ReturnType<typeof consentOf>>>(true);

export const snippetResponse = z.object({
  action: z.string().meta({ description: 'The URL the form posts to' }),
  html: z.string().meta({ description: 'A copyable HTML form with one checkbox per public topic' }),
});
