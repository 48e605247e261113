import { z } from 'zod';
import { simpleBadRequest } from '../../errors';
import { queryBoolean, queryChoice, queryEnum, queryInt, queryText, queryUuid } from '../../http/query';
import { cursorList, dateTime, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import type { toBulkJobDto } from './bulk-jobs';
import type { fieldUsage, fieldValues, listFields } from './contact-fields';
import type { toImportDto } from './contact-imports';
import type { ContactDto, listContacts, lookupContacts } from './contacts.service';
import { dataMapSchema } from './data-map';
import type { TopicState } from '../topics';

export const createContactSchema = z.object({
  email: emailSchema,
  subscribed: z.boolean().optional(),
  data: dataMapSchema.optional(),
});

/** A change of a contact's topics: true joins (pending where double opt-in applies), false leaves. */
const topicChanges = z
  .record(z.uuid({ message: 'topics must be keyed by topic id (UUID)' }), z.boolean())
  .meta({ description: 'Topic id → true (join; pending until confirmed where double opt-in applies) or false (leave)' });

// Spelled out rather than imported: the topics module loads the events module, which needs this one loaded.
const topicState = z.enum(['subscribed', 'unsubscribed', 'pending']);
sameShape<z.output<typeof topicState>, TopicState>(true);

export const SNOOZE_DURATIONS = ['2_weeks', '1_month', '6_months', '1_year'] as const;

export const patchContactSchema = z
  .object({
    email: emailSchema.optional(),
    subscribed: z.boolean().optional(),
    data: dataMapSchema.optional(),
    snoozedUntil: z.iso.datetime({ offset: true, message: 'snoozedUntil must be an ISO 8601 date-time' }).nullable().optional(),
    snooze: z.enum(SNOOZE_DURATIONS).optional(),
    topics: topicChanges.optional(),
  })
  .superRefine((v, ctx) => {
    const snoozing = v.snooze !== undefined || (v.snoozedUntil !== undefined && v.snoozedUntil !== null);
    if (v.snooze !== undefined && v.snoozedUntil !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['snooze'], message: 'Give either snooze or snoozedUntil, not both' });
    }
    if (snoozing && v.subscribed !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['subscribed'], message: 'subscribed cannot be combined with a snooze' });
    }
    if (v.snoozedUntil && Date.parse(v.snoozedUntil) <= Date.now()) {
      ctx.addIssue({ code: 'custom', path: ['snoozedUntil'], message: 'snoozedUntil must be in the future' });
    }
  });

/** The text fields beside an import's file. */
export const importFieldsSchema = z.object({
  topics: z
    .union([z.string(), z.array(z.string())])
    .optional()
    .meta({
      description: 'Topic ids (comma-separated, or the field repeated) every imported contact joins; a contact that already chose in a topic keeps its choice',
    }),
  doubleOptIn: z
    .enum(['true', 'false'])
    .optional()
    .meta({
      description:
        'true: those joins wait for an emailed confirmation where double opt-in applies (the topic’s or the project’s setting); ' +
        'false (default): the importer vouches for consent',
    }),
});

export const lookupSchema = z.object({
  emails: z.array(emailSchema).min(1).max(500),
});

export const bulkSchema = z.object({
  contactIds: z
    .array(z.uuid({ message: 'contactIds must hold contact ids (UUIDs)' }))
    .min(1)
    .max(1000),
  topicId: z
    .uuid()
    .optional()
    .meta({ description: 'bulk-subscribe and bulk-unsubscribe only: join or leave this topic instead of changing the global subscription' }),
});

/** GET /contacts: failures answer in the simple `{ error }` form, in this order. */
export const contactListQuery = z.object({
  limit: queryInt({ default: 20, min: 1, max: 100 }),
  cursor: queryUuid(() => simpleBadRequest('Invalid cursor'), 'The `cursor` of the previous page'),
  subscribed: queryBoolean(() => simpleBadRequest('subscribed must be true or false'), 'Omitted: both'),
  status: queryEnum(['subscribed', 'unsubscribed', 'snoozed'], () => simpleBadRequest('status must be one of subscribed, unsubscribed, snoozed')),
  search: queryText({ description: 'Case-insensitive substring of the email' }),
  sort: queryChoice(['email', 'createdAt'], 'createdAt'),
  dir: queryChoice(['asc', 'desc'], 'desc'),
});

export const fieldValuesQuery = z.object({ limit: queryInt({ default: 50, min: 1, max: 100 }) });

export const contactResponse = z.object({
  id: z.string(),
  email: z.string(),
  subscribed: z.boolean(),
  snoozedUntil: dateTime.nullable().meta({ description: 'Set while snoozed; the contact is resubscribed when it passes' }),
  data: z.record(z.string(), z.unknown()).meta({ description: 'Custom contact data fields' }),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof contactResponse>, ContactDto>(true);

/** One contact with its state in every topic of the project. */
export const contactWithTopicsResponse = contactResponse.extend({
  topics: z
    .record(z.string(), topicState)
    .meta({ description: 'Every topic of the project by id, with the contact’s state in it (the topic’s default where the contact made no choice)' }),
});

export const upsertedContactResponse = contactResponse.extend({ _meta: z.object({ isNew: z.boolean(), isUpdate: z.boolean() }) });
export const contactListResponse = cursorList(contactResponse);
sameShape<z.output<typeof contactListResponse>, Awaited<ReturnType<typeof listContacts>>>(true);

export const lookupResponse = z.object({ found: z.array(z.object({ id: z.string(), email: z.string() })), missing: z.array(z.string()) });
sameShape<z.output<typeof lookupResponse>, Awaited<ReturnType<typeof lookupContacts>>>(true);

const field = z.object({
  name: z.string(),
  type: z.string().meta({ description: 'string, number, boolean, date, object or array: the type most values have' }),
  standard: z.boolean(),
  count: z.number().int().meta({ description: 'Contacts that have the field' }),
  coverage: z.number().meta({ description: 'Percentage of the project’s contacts that have it' }),
  types: z.record(z.string(), z.number().int()).optional().meta({ description: 'Count per type, when values differ in type' }),
});
export const fieldsResponse = z.object({ data: z.array(field), totalContacts: z.number().int() });
sameShape<z.output<typeof fieldsResponse>['totalContacts'], Awaited<ReturnType<typeof listFields>>['totalContacts']>(true);

export const fieldValuesResponse = z.object({ field: z.string(), data: z.array(z.object({ value: z.unknown(), count: z.number().int() })) });
sameShape<z.output<typeof fieldValuesResponse>, Awaited<ReturnType<typeof fieldValues>>>(true);

const usedBy = z.object({ id: z.string(), name: z.string() });
export const fieldUsageResponse = z.object({
  field: z.string(),
  segments: z.array(usedBy),
  campaigns: z.array(usedBy),
  workflows: z.array(usedBy.extend({ usedAs: z.string() })),
  total: z.number().int(),
});
sameShape<z.output<typeof fieldUsageResponse>, Awaited<ReturnType<typeof fieldUsage>>>(true);

export const fieldDeletedResponse = z.object({ field: z.string(), deleted: z.literal(true), contactsUpdated: z.number().int() });

export const importJobResponse = z.object({
  jobId: z.string(),
  topics: z.array(z.string()).meta({ description: 'The topics every imported contact joins' }),
  doubleOptIn: z.boolean(),
  status: z.enum(['QUEUED', 'RUNNING', 'COMPLETED', 'FAILED']),
  filename: z.string().nullable(),
  sizeBytes: z.number().int(),
  processedBytes: z.number().int(),
  rows: z.number().int(),
  imported: z.number().int(),
  created: z.number().int(),
  updated: z.number().int(),
  invalid: z.number().int(),
  errors: z.array(z.object({ line: z.number().int(), error: z.string() })),
  error: z.string().nullable(),
  createdAt: dateTime,
  updatedAt: dateTime,
  completedAt: dateTime.nullable(),
});
sameShape<z.output<typeof importJobResponse>, ReturnType<typeof toImportDto>>(true);

export const bulkJobResponse = z.object({
  jobId: z.string(),
  type: z.enum(['subscribe', 'unsubscribe', 'delete']),
  topicId: z.string().nullable().meta({ description: 'The topic joined or left; null: the global subscription' }),
  status: z.enum(['QUEUED', 'RUNNING', 'COMPLETED']),
  total: z.number().int(),
  processed: z.number().int(),
  changed: z.number().int(),
  unchanged: z.number().int(),
  notFound: z.array(z.string()),
  createdAt: dateTime,
  updatedAt: dateTime,
  completedAt: dateTime.nullable(),
});
sameShape<z.output<typeof bulkJobResponse>, ReturnType<typeof toBulkJobDto>>(true);

/** End of a snooze of the given length, from now, in calendar terms for months and years. */
export function snoozeEnd(duration: (typeof SNOOZE_DURATIONS)[number], from = new Date()): Date {
  const d = new Date(from);
  if (duration === '2_weeks') d.setUTCDate(d.getUTCDate() + 14);
  if (duration === '1_month') d.setUTCMonth(d.getUTCMonth() + 1);
  if (duration === '6_months') d.setUTCMonth(d.getUTCMonth() + 6);
  if (duration === '1_year') d.setUTCFullYear(d.getUTCFullYear() + 1);
  return d;
}
