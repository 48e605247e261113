import { z } from 'zod';
import { simpleBadRequest } from '../../errors';
import { pageQuery, sortQuery } from '../../http/pagination';
import { queryEnum, queryText } from '../../http/query';
import { dateTime, offsetList, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import { trackingOverrideSchema } from '../accounts';
import { BODY_FORMATS } from './template-content';
import type { listTemplates, templateUsage, toTemplateDto } from './templates.service';

export const TEMPLATE_TYPES = ['TRANSACTIONAL', 'MARKETING', 'HEADLESS'] as const;

/** Subjects are one header line: 1-998 characters, no line breaks (RFC 5322 §2.1.1). */
export const subjectSchema = z
  .string()
  .min(1)
  .max(998)
  .refine((s) => !/[\r\n]/.test(s), { message: 'Subject cannot contain line breaks', params: { code: 'invalid_string' } });

const displayName = z
  .string()
  .max(200)
  .refine((s) => !/[\r\n]/.test(s), { message: 'Cannot contain line breaks', params: { code: 'invalid_string' } });

export const templateFields = {
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000).nullable().optional(),
  subject: subjectSchema,
  body: z.string().min(1).max(5_000_000).meta({ description: 'HTML, or an MJML source (format mjml), with Liquid: checked when written' }),
  format: z.enum(BODY_FORMATS).optional().meta({ description: 'html (default) or mjml: an MJML body is compiled to HTML when written' }),
  from: emailSchema,
  fromName: displayName.nullable().optional(),
  replyTo: emailSchema.nullable().optional(),
  type: z.enum(TEMPLATE_TYPES).optional(),
  tracking: trackingOverrideSchema.nullable().optional(),
};

export const REQUIRED_TEMPLATE_FIELDS = ['name', 'subject', 'body', 'from'] as const;

export const createTemplateSchema = z.object(templateFields);
export const updateTemplateSchema = z.object({
  name: templateFields.name.optional(),
  description: templateFields.description,
  subject: subjectSchema.optional(),
  body: templateFields.body.optional(),
  format: templateFields.format,
  from: emailSchema.optional(),
  fromName: templateFields.fromName,
  replyTo: templateFields.replyTo,
  type: templateFields.type,
  tracking: templateFields.tracking,
});

export type CreateTemplate = z.output<typeof createTemplateSchema>;
export type UpdateTemplate = z.output<typeof updateTemplateSchema>;

export const templateListQuery = z.object({
  ...pageQuery,
  ...sortQuery({ name: 'name', createdAt: 'createdAt', updatedAt: 'updatedAt' }, 'createdAt'),
  type: queryEnum(TEMPLATE_TYPES, () => simpleBadRequest(`type must be one of ${TEMPLATE_TYPES.join(', ')}`)),
  search: queryText({ trim: true, description: 'Case-insensitive match on name, description or subject' }),
});

export const templateResponse = z.object({
  id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  subject: z.string(),
  body: z.string().meta({ description: 'As written: HTML, or the MJML source, with Liquid (docs/api.md, Templates)' }),
  format: z.enum(BODY_FORMATS),
  from: z.string(),
  fromName: z.string().nullable(),
  replyTo: z.string().nullable(),
  type: z.enum(TEMPLATE_TYPES),
  tracking: trackingOverrideSchema.nullable(),
  projectId: z.string(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof templateResponse>, ReturnType<typeof toTemplateDto>>(true);

export const templateListResponse = offsetList(templateResponse);
sameShape<z.output<typeof templateListResponse>, Awaited<ReturnType<typeof listTemplates>>>(true);

export const templateUsageResponse = z.object({
  templateId: z.string(),
  campaigns: z
    .array(z.object({ id: z.string(), name: z.string(), status: z.string() }))
    .meta({ description: 'Always empty: campaigns carry their own content' }),
  workflowSteps: z.array(z.object({ id: z.string(), workflowId: z.string(), workflowName: z.string() })),
  total: z.number().int(),
});
sameShape<z.output<typeof templateUsageResponse>, Awaited<ReturnType<typeof templateUsage>>>(true);
