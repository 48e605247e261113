import { z } from 'zod';
import { emailSchema } from '../../http/validate';

export const TEMPLATE_TYPES = ['TRANSACTIONAL', 'MARKETING', 'HEADLESS'] as const;

/** Subjects are one header line: 1-998 characters, no line breaks (RFC 5322 §2.1.1). */
export const subjectSchema = z
  .string()
  .min(1)
  .max(998)
  .refine((s) => !/[\r\n]/.test(s), { message: 'Subject cannot contain line breaks', params: { code: 'invalid_string' } });

const displayName = z.string().max(200).refine((s) => !/[\r\n]/.test(s), { message: 'Cannot contain line breaks', params: { code: 'invalid_string' } });

export const templateFields = {
  name: z.string().trim().min(1).max(200),
  description: z.string().max(2000).nullable().optional(),
  subject: subjectSchema,
  body: z.string().min(1).max(5_000_000),
  from: emailSchema,
  fromName: displayName.nullable().optional(),
  replyTo: emailSchema.nullable().optional(),
  type: z.enum(TEMPLATE_TYPES).optional(),
};

export const REQUIRED_TEMPLATE_FIELDS = ['name', 'subject', 'body', 'from'] as const;

export const createTemplateSchema = z.object(templateFields);
export const updateTemplateSchema = z.object({
  name: templateFields.name.optional(),
  description: templateFields.description,
  subject: subjectSchema.optional(),
  body: templateFields.body.optional(),
  from: emailSchema.optional(),
  fromName: templateFields.fromName,
  replyTo: templateFields.replyTo,
  type: templateFields.type,
});

export type CreateTemplate = z.output<typeof createTemplateSchema>;
export type UpdateTemplate = z.output<typeof updateTemplateSchema>;
