import { trackingOverrideSchema } from '../accounts';
import { z } from 'zod';
import { badRequest } from '../../http/errors';
import { pageQuery, sortQuery } from '../../http/pagination';
import { queryEnum, queryText } from '../../http/query';
import { dateTime, offsetList, sameShape, successEnvelope } from '../../http/responses';
import { emailSchema } from '../../http/validate';
import { conditionInput, conditionTree } from '../segments';
import { subjectSchema, TEMPLATE_TYPES } from '../templates';
import type { campaignStats, listCampaigns, toCampaignDto } from './campaigns.service';

export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];

/** Create and PUT (update by replacement) take the same body. */
export const campaignSchema = z.object({
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000).nullable().optional(),
  subject: subjectSchema,
  body: z.string().min(1).max(5_000_000),
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
});

export type CampaignInput = z.output<typeof campaignSchema>;

export const sendCampaignSchema = z.object({
  scheduledFor: z
    .union([z.string(), z.number()])
    .nullable()
    .optional()
    .meta({ description: 'When to send: anything a JavaScript Date reads (400 otherwise); omitted or null sends now' }),
});

export const testSendSchema = z.object({ email: emailSchema });

export const campaignListQuery = z.object({
  ...pageQuery,
  ...sortQuery({ name: 'name', createdAt: 'createdAt', updatedAt: 'updatedAt' }, 'createdAt'),
  status: queryEnum(CAMPAIGN_STATUSES, () => badRequest(`status must be one of ${CAMPAIGN_STATUSES.join(', ')}`, 'INVALID_STATUS')),
  search: queryText({ trim: true, description: 'Case-insensitive match on name, subject or sender address' }),
});

export const campaignResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  subject: z.string(),
  body: z.string(),
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
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof campaignResponse>, ReturnType<typeof toCampaignDto>>(true);

export const campaignEnvelope = successEnvelope(campaignResponse);
export const campaignActionResponse = campaignEnvelope.extend({ message: z.string() });

export const campaignListResponse = offsetList(campaignResponse);
sameShape<z.output<typeof campaignListResponse>, Awaited<ReturnType<typeof listCampaigns>>>(true);

export const testSendResponse = successEnvelope(z.object({ email: z.string().meta({ description: 'The email record id' }), to: z.string() }));

const count = z.number().int();
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
