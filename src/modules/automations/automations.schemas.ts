import { z } from 'zod';
import { badRequest } from '../../errors';
import { jsonSchemaOf } from '../../http/openapi';
import { queryEnum, queryFlag, queryInt } from '../../http/query';
import { dateTime, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import type { executionSteps, toExecutionDto } from './executions.service';
import type { conditionFields, toStepDto, toTransitionDto, toAutomationDto } from './automations.service';
import { dataMapSchema } from '../contacts';
import { eventNameSchema } from '../events';

export const STEP_TYPES = ['TRIGGER', 'SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'] as const;
export type StepType = (typeof STEP_TYPES)[number];

export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

const triggerConfig = z.object({ eventName: eventNameSchema }).passthrough();

export const createAutomationSchema = z
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

export const updateAutomationSchema = z.object({
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
      topicId: z
        .uuid()
        .nullable()
        .optional()
        .meta({ description: 'A topic of the project: a MARKETING template is sent only to a contact that receives it, with an unsubscribe link leaving it' }),
      recipient: z
        .object({ type: z.enum(['CONTACT', 'CUSTOM']), customEmail: emailSchema.optional() })
        .refine((r) => r.type !== 'CUSTOM' || !!r.customEmail, { message: 'customEmail is required for a CUSTOM recipient', path: ['customEmail'] })
        .optional(),
    })
    .strict(),
  DELAY: z
    .object({ amount: z.number().positive(), unit: z.enum(['minutes', 'hours', 'days']) })
    .strict()
    .refine((d) => d.amount * UNIT_SECONDS[d.unit] <= MAX_DELAY_SECONDS, {
      message: 'A delay is at most 365 days',
      path: ['amount'],
      params: { code: 'too_big' },
    }),
  WAIT_FOR_EVENT: z.object({ eventName: eventNameSchema, timeout: z.number().int().positive().max(MAX_DELAY_SECONDS).optional() }).strict(),
  CONDITION: z
    .object({
      field: z
        .string()
        .regex(
          /^(contact\.(email|subscribed)|data\..+|event\..+|workflow\..+)$/,
          'field is contact.email, contact.subscribed, data.<path>, event.<name> or workflow.<path>',
        ),
      operator: z.string().min(1),
      value: z.unknown().optional(),
      unit: z.enum(['minutes', 'hours', 'days']).optional(),
    })
    .strict(),
  WEBHOOK: z
    .object({
      url: z.string().min(1).max(2000),
      method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']).default('POST'),
      headers: z
        .record(
          z.string().regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/),
          z
            .string()
            .max(4000)
            .refine((v) => !/[\r\n]/.test(v)),
        )
        .optional(),
      body: z.union([z.string(), z.record(z.string(), z.unknown()), z.array(z.unknown())]).optional(),
    })
    .strict(),
  UPDATE_CONTACT: z.object({ updates: dataMapSchema.optional(), subscriptionAction: z.enum(['none', 'subscribe', 'unsubscribe']).default('none') }).strict(),
  EXIT: z.object({ reason: z.string().max(500).optional() }).strict(),
} as const;

const position = z.record(z.string(), z.unknown()).nullable().optional().meta({ description: 'Where an editor draws the step' });

// Steps take `config` as any JSON here; the service checks it against the step's type, with these schemas.
const stepConfig = z
  .unknown()
  .optional()
  .meta({
    description: 'The settings of the step’s type, checked against that type',
    anyOf: Object.entries(stepConfigSchemas).map(([type, schema]) => ({ title: type, ...jsonSchemaOf(schema) })),
  });

export const createStepSchema = z.object({
  type: z.enum(STEP_TYPES),
  name: z.string().trim().min(1).max(200),
  config: stepConfig,
  position,
});

export const updateStepSchema = z.object({
  name: z.string().trim().min(1).max(200).optional(),
  config: stepConfig,
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

export const executionListQuery = z.object({
  status: queryEnum(EXECUTION_STATUSES, () => badRequest(`status must be one of ${EXECUTION_STATUSES.join(', ')}`, 'INVALID_STATUS')),
  limit: queryInt({ default: 100, min: 1, max: 100, zeroIsDefault: true }),
  offset: queryInt({ default: 0, min: 0 }),
});

export const deleteStepQuery = z.object({ splice: queryFlag('Reconnect the step’s incoming transitions to its successor') });

export const stepResponse = z.object({
  id: z.string(),
  type: z.enum(STEP_TYPES),
  name: z.string(),
  config: z.record(z.string(), z.unknown()),
  position: z.record(z.string(), z.unknown()).nullable(),
});
sameShape<z.output<typeof stepResponse>, ReturnType<typeof toStepDto>>(true);

export const transitionResponse = z.object({
  id: z.string(),
  fromStepId: z.string(),
  toStepId: z.string(),
  branch: z.enum(['yes', 'no']).nullable().meta({ description: 'From a CONDITION step' }),
  outcome: z.enum(['event', 'timeout']).nullable().meta({ description: 'From a WAIT_FOR_EVENT step' }),
});
sameShape<z.output<typeof transitionResponse>, ReturnType<typeof toTransitionDto>>(true);

export const automationResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  triggerType: z.literal('EVENT'),
  triggerConfig: z.object({ eventName: z.string() }),
  enabled: z.boolean(),
  allowReentry: z.boolean(),
  steps: z.array(stepResponse),
  transitions: z.array(transitionResponse),
  projectId: z.string(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof automationResponse>, ReturnType<typeof toAutomationDto>>(true);

export const automationListResponse = z.object({
  data: z.array(automationResponse.extend({ executions: z.object({ active: z.number().int(), total: z.number().int() }) })),
});

const fieldDoc = z.object({ field: z.string(), operators: z.array(z.string()) });
export const conditionFieldsResponse = z.object({
  contact: z.array(fieldDoc.extend({ type: z.string() })),
  data: z.array(fieldDoc),
  events: z.array(fieldDoc),
  workflow: fieldDoc.extend({ description: z.string() }),
});
sameShape<z.output<typeof conditionFieldsResponse>, Awaited<ReturnType<typeof conditionFields>>>(true);

export const executionResponse = z.object({
  id: z.string(),
  workflowId: z.string(),
  contactId: z.string(),
  status: z.enum(EXECUTION_STATUSES),
  context: z.record(z.string(), z.unknown()),
  currentStepId: z.string().nullable(),
  triggerEventId: z.string().nullable(),
  error: z.string().nullable(),
  createdAt: dateTime,
  updatedAt: dateTime,
  completedAt: dateTime.nullable(),
});
sameShape<z.output<typeof executionResponse>, ReturnType<typeof toExecutionDto>>(true);

const executionStep = z.object({
  id: z.string(),
  stepId: z.string(),
  type: z.string(),
  status: z.string(),
  output: z.unknown(),
  error: z.string().nullable(),
  startedAt: dateTime,
  completedAt: dateTime.nullable(),
});
sameShape<z.output<typeof executionStep>[], Awaited<ReturnType<typeof executionSteps>>>(true);
export const executionDetailResponse = executionResponse.extend({ steps: z.array(executionStep) });
