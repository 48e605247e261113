import { trackingOverrideSchema } from '../accounts';
import { z } from 'zod';
import { badRequest } from '../../http/errors';
import { pageQuery, sortQuery } from '../../http/pagination';
import { queryEnum, queryText } from '../../http/query';
import { dateTime, offsetList, sameShape, successEnvelope } from '../../http/responses';
import { emailSchema } from '../../http/validate';
import { conditionInput, conditionTree } from '../segments';
import { BODY_FORMATS, subjectSchema, TEMPLATE_TYPES } from '../templates';
import type { campaignStats, listCampaigns, toCampaignDto } from './campaigns.service';

export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'TESTING', 'SENT', 'CANCELLED'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
/** A campaign whose workflow runs: it cannot be deleted, and its segment, topic and sender stay. */
export const ACTIVE_CAMPAIGN_STATUSES = ['SCHEDULED', 'SENDING', 'TESTING'] as const;

const displayName = z
  .string()
  .max(200)
  .refine((s) => !/[\r\n]/.test(s), { message: 'Cannot contain line breaks', params: { code: 'invalid_string' } });

/** Variant ids, in the order the variants are given. */
export const VARIANT_IDS = ['A', 'B', 'C', 'D'] as const;
export const AB_PHASES = ['testing', 'waiting', 'winner', 'done'] as const;
export type AbPhase = (typeof AB_PHASES)[number];

export const abTestSchema = z
  .object({
    variants: z
      .array(
        z.object({
          subject: subjectSchema.optional(),
          body: z.string().min(1).max(5_000_000).optional(),
          from: emailSchema.optional(),
          fromName: displayName.nullable().optional(),
        }),
      )
      .min(2)
      .max(4)
      .meta({ description: 'Each overrides the campaign’s fields; their ids are "A", "B", ... in this order' }),
    testPercent: z.number().int().min(5).max(50).meta({ description: 'round(N × testPercent / 100) recipients get a variant, split evenly' }),
    waitMinutes: z.number().int().min(1).max(10080).meta({ description: 'How long after the sample is sent the winner is picked' }),
    winnerCriteria: z
      .enum(['opens', 'clicks', 'manual'])
      .meta({ description: 'Highest unique open or click rate among its test recipients (a tie goes to the lowest id), or POST /campaigns/:id/winner' }),
  })
  .meta({ description: 'An A/B test: variants to a sample of the audience, then the winner to the rest' });
export type AbTestInput = z.output<typeof abTestSchema>;
/** As stored: each variant with its id, and the HTML an MJML body compiled to (never shown). */
export type AbTest = Omit<AbTestInput, 'variants'> & { variants: Array<AbTestInput['variants'][number] & { id: string; bodyHtml?: string }> };

/** An IANA time zone name ("Europe/Paris", "UTC"): a name, not an offset, that this runtime knows. */
export const timeZoneName = z
  .string()
  .max(64)
  .refine(isTimeZoneName, { message: 'Not an IANA time zone name', params: { code: 'invalid_string' } });

export function isTimeZoneName(name: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+){0,2}$/.test(name)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export const localTimeSchema = z
  .object({
    at: z.string().regex(/^(?:[01]\d|2[0-3]):[0-5]\d$/, { message: 'Expected HH:MM' }),
    date: z.iso.date(),
    defaultTimezone: timeZoneName.meta({ description: 'For a contact without a valid `data.timezone`' }),
    pastPolicy: z
      .enum(['send_now', 'skip', 'next_day'])
      .meta({ description: 'For a zone whose moment has passed when sending starts: send at once, leave it out, or send a day later' }),
  })
  .meta({ description: 'Each recipient gets the campaign at `at` on `date` in their own time zone (`data.timezone`, else defaultTimezone)' });
export type LocalTime = z.output<typeof localTimeSchema>;

/** Create and PUT (update by replacement) take the same body. */
export const campaignSchema = z.object({
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000).nullable().optional(),
  subject: subjectSchema,
  body: z.string().min(1).max(5_000_000).meta({ description: 'HTML, or an MJML source (format mjml), with Liquid: checked when written' }),
  format: z.enum(BODY_FORMATS).default('html').meta({ description: 'html or mjml: an MJML body is compiled to HTML when written' }),
  from: emailSchema,
  fromName: z
    .string()
    .max(200)
    .refine((s) => !/[\r\n]/.test(s), { message: 'Cannot contain line breaks', params: { code: 'invalid_string' } })
    .nullable()
    .optional(),
  replyTo: emailSchema.nullable().optional(),
  type: z.enum(TEMPLATE_TYPES).default('MARKETING'),
  audienceType: z.enum(['ALL', 'SEGMENT', 'FILTERED']),
  segmentId: z.uuid().nullable().optional().meta({ description: 'Required when audienceType is SEGMENT' }),
  audienceCondition: conditionInput.optional().meta({ description: 'Required when audienceType is FILTERED' }),
  topicId: z
    .uuid()
    .nullable()
    .optional()
    .meta({ description: 'A topic of the project (MARKETING only): only contacts that receive it get the campaign, and its unsubscribe link leaves it' }),
  tracking: trackingOverrideSchema.nullable().optional(),
  abTest: abTestSchema.nullable().optional(),
  localTime: localTimeSchema.nullable().optional(),
});

export type CampaignInput = z.output<typeof campaignSchema>;

export const sendCampaignSchema = z.object({
  scheduledFor: z
    .union([z.string(), z.number()])
    .nullable()
    .optional()
    .meta({ description: 'When to send: anything a JavaScript Date reads (400 otherwise); omitted or null sends now' }),
});

export const testSendSchema = z
  .object({
    email: emailSchema.optional().meta({ description: 'One address (the older form of emails)' }),
    emails: z.array(emailSchema).min(1).max(50).optional().meta({ description: '1 to 50 addresses, one message each' }),
    contactId: z.uuid().optional().meta({ description: 'Render for this contact’s data; else for each address’s own contact, else for no data' }),
  })
  .refine((b) => (b.email === undefined) !== (b.emails === undefined), { message: 'Give emails (or email), not both', path: ['emails'] });

export const chooseWinnerSchema = z.object({ variantId: z.enum(VARIANT_IDS) });

export const campaignListQuery = z.object({
  ...pageQuery,
  ...sortQuery({ name: 'name', createdAt: 'createdAt', updatedAt: 'updatedAt' }, 'createdAt'),
  status: queryEnum(CAMPAIGN_STATUSES, () => badRequest(`status must be one of ${CAMPAIGN_STATUSES.join(', ')}`, 'INVALID_STATUS')),
  search: queryText({ trim: true, description: 'Case-insensitive match on name, subject or sender address' }),
});

const count = z.number().int();

export const campaignResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  subject: z.string(),
  body: z.string().meta({ description: 'As written: HTML, or the MJML source' }),
  format: z.enum(BODY_FORMATS),
  from: z.string(),
  fromName: z.string().nullable(),
  replyTo: z.string().nullable(),
  type: z.enum(TEMPLATE_TYPES),
  tracking: trackingOverrideSchema.nullable(),
  status: z.enum(CAMPAIGN_STATUSES),
  audienceType: z.enum(['ALL', 'SEGMENT', 'FILTERED']),
  segmentId: z.string().nullable().optional().meta({ description: 'Only when audienceType is SEGMENT' }),
  audienceCondition: conditionTree.nullable().optional().meta({ description: 'Only when audienceType is FILTERED' }),
  topicId: z.string().nullable().meta({ description: 'The topic the campaign is sent for; null: every subscribed contact of the audience' }),
  scheduledFor: dateTime.nullable(),
  totalRecipients: z.number().int(),
  sentCount: z.number().int(),
  deliveredCount: z.number().int(),
  openedCount: z.number().int(),
  clickedCount: z.number().int(),
  bouncedCount: z.number().int(),
  projectId: z.string(),
  sentAt: dateTime.nullable(),
  abTest: abTestSchema
    .extend({
      variants: z.array(
        z.object({
          id: z.string(),
          subject: z.string().optional(),
          body: z.string().optional(),
          from: z.string().optional(),
          fromName: z.string().nullable().optional(),
          sent: count.optional().meta({ description: 'GET /campaigns/:id only: its emails sent' }),
          opened: count.optional().meta({ description: 'GET /campaigns/:id only: its emails opened at least once' }),
          clicked: count.optional().meta({ description: 'GET /campaigns/:id only: its emails clicked at least once' }),
        }),
      ),
      winnerVariantId: z.string().nullable(),
      phase: z.enum(AB_PHASES).nullable().meta({ description: 'null until sending starts' }),
    })
    .nullable(),
  localTime: localTimeSchema
    .extend({
      waiting: z
        .array(z.object({ timezone: z.string(), sendAt: dateTime, recipients: count }))
        .optional()
        .meta({ description: 'GET /campaigns/:id only, while sending: the zones whose moment has not come, and their recipients' }),
    })
    .nullable(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof campaignResponse>, ReturnType<typeof toCampaignDto>>(true);

export const campaignEnvelope = successEnvelope(campaignResponse);
export const campaignActionResponse = campaignEnvelope.extend({ message: z.string() });

export const campaignListResponse = offsetList(campaignResponse);
sameShape<z.output<typeof campaignListResponse>, Awaited<ReturnType<typeof listCampaigns>>>(true);

export const testSendResponse = successEnvelope(
  z.object({
    email: z.string().meta({ description: 'The first email record id' }),
    to: z.string().meta({ description: 'Its address' }),
    emails: z.array(
      z.object({
        email: z.string().meta({ description: 'The email record id' }),
        to: z.string(),
        status: z.enum(['QUEUED', 'SUPPRESSED']).meta({ description: 'SUPPRESSED: the address is on the suppression list, and gets nothing' }),
      }),
    ),
  }),
);

export const campaignStatsResponse = z.object({
  campaignId: z.string(),
  status: z.enum(CAMPAIGN_STATUSES),
  totalRecipients: count,
  total: count,
  queued: count,
  sent: count,
  delivered: count,
  opened: count,
  clicked: count,
  bounced: count,
  complained: count,
  failed: count,
  cancelled: count,
  suppressed: count.meta({ description: 'Recipients suppressed after the audience was fixed: recorded, never sent' }),
  opens: count.meta({ description: 'All opens, repeats included' }),
  clicks: count.meta({ description: 'All clicks, repeats included' }),
  openRate: z.number().meta({ description: 'Percent of sent' }),
  clickRate: z.number(),
  bounceRate: z.number(),
  complaintRate: z.number(),
});
sameShape<z.output<typeof campaignStatsResponse>['openRate'], Awaited<ReturnType<typeof campaignStats>>['openRate']>(true);
