import { z } from 'zod';
import { emailSchema } from '../../http/validate';
import { subjectSchema, TEMPLATE_TYPES } from '../templates/templates.schemas';

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
  segmentId: z.uuid().nullable().optional(),
  audienceCondition: z.unknown().optional(),
});

export type CampaignInput = z.output<typeof campaignSchema>;

export const sendCampaignSchema = z.object({
  scheduledFor: z.union([z.string(), z.number()]).nullable().optional(),
});

export const testSendSchema = z.object({ email: emailSchema });
