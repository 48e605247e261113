import { z } from 'zod';
import { emailSchema } from '../../http/validate';
import { dataMapSchema } from '../contacts/data-map';
import { eventNameSchema } from '../events/events.schemas';

export const STEP_TYPES = ['TRIGGER', 'SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

const triggerConfig = z.object({ eventName: eventNameSchema }).passthrough();

export const createWorkflowSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().max(2000).nullable().optional(),
    triggerConfig: triggerConfig.optional(),
    eventName: eventNameSchema.optional(),
  })
  .superRefine((v, ctx) => {
    if (!v.triggerConfig && !v.eventName) {
      ctx.addIssue({ code: 'custom', path: ['triggerConfig', 'eventName'], message: 'triggerConfig.eventName is required', params: { code: 'invalid_type' } });
    }
  })
  .transform((v) => ({ name: v.name, description: v.description ?? null, triggerConfig: v.triggerConfig ?? { eventName: v.eventName! } }));

export const updateWorkflowSchema = z.object({
  name: z.string().trim().min(1).max(200).optional(),
  description: z.string().max(2000).nullable().optional(),
  triggerType: z.literal('EVENT').optional(),
  triggerConfig: triggerConfig.optional(),
  enabled: z.boolean().optional(),
  allowReentry: z.boolean().optional(),
});

const MAX_DELAY_SECONDS = 365 * 86_400;
export const UNIT_SECONDS = { minutes: 60, hours: 3600, days: 86_400 } as const;

/** Step configs, as the reference semantics list them. */
export const stepConfigSchemas = {
  TRIGGER: z.object({}).passthrough(),
  SEND_EMAIL: z
    .object({
      templateId: z.uuid(),
      recipient: z
        .object({ type: z.enum(['CONTACT', 'CUSTOM']), customEmail: emailSchema.optional() })
        .refine((r) => r.type !== 'CUSTOM' || !!r.customEmail, { message: 'customEmail is required for a CUSTOM recipient', path: ['customEmail'] })
        .optional(),
    })
    .strict(),
  DELAY: z
    .object({ amount: z.number().positive(), unit: z.enum(['minutes', 'hours', 'days']) })
    .strict()
    .refine((d) => d.amount * UNIT_SECONDS[d.unit] <= MAX_DELAY_SECONDS, { message: 'A delay is at most 365 days', path: ['amount'], params: { code: 'too_big' } }),
  WAIT_FOR_EVENT: z
    .object({ eventName: eventNameSchema, timeout: z.number().int().positive().max(MAX_DELAY_SECONDS).optional() })
    .strict(),
  CONDITION: z
    .object({
      field: z.string().regex(/^(contact\.(email|subscribed)|data\..+|event\..+|workflow\..+)$/, 'field is contact.email, contact.subscribed, data.<path>, event.<name> or workflow.<path>'),
      operator: z.string().min(1),
      value: z.unknown().optional(),
      unit: z.enum(['minutes', 'hours', 'days']).optional(),
    })
    .strict(),
  WEBHOOK: z
    .object({
      url: z.string().min(1).max(2000),
      method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
      headers: z.record(z.string().regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/), z.string().max(4000).refine((v) => !/[\r\n]/.test(v))).optional(),
      body: z.union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())]).optional(),
    })
    .strict(),
  UPDATE_CONTACT: z
    .object({ updates: dataMapSchema.optional(), subscriptionAction: z.enum(['none', 'subscribe', 'unsubscribe']).default('none') })
    .strict(),
  EXIT: z.object({ reason: z.string().max(500).optional() }).strict(),
} as const;

const position = z.record(z.string(), z.unknown()).nullable().optional();

export const createStepSchema = z.object({
  type: z.enum(STEP_TYPES),
  name: z.string().trim().min(1).max(200),
  config: z.unknown().optional(),
  position,
});

export const updateStepSchema = z.object({
  name: z.string().trim().min(1).max(200).optional(),
  config: z.unknown().optional(),
  position,
});

export const createTransitionSchema = z.object({
  fromStepId: z.uuid(),
  toStepId: z.uuid(),
  branch: z.enum(['yes', 'no']).optional(),
  outcome: z.enum(['event', 'timeout']).optional(),
});

export const startExecutionSchema = z.object({
  contactId: z.uuid(),
  context: z.record(z.string(), z.unknown()).optional(),
});
