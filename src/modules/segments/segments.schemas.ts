import { z } from 'zod';
import { emailSchema } from '../../http/validate';

export const createSegmentSchema = z.object({
  name: z.string().trim().min(1).max(100),
  description: z.string().max(500).nullable().optional(),
  type: z.enum(['DYNAMIC', 'STATIC']).default('DYNAMIC'),
  condition: z.unknown().optional(),
  trackMembership: z.boolean().default(false),
});

export const updateSegmentSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  description: z.string().max(500).nullable().optional(),
  condition: z.unknown().optional(),
  trackMembership: z.boolean().optional(),
});

export const addMembersSchema = z.object({
  emails: z.array(emailSchema).min(1).max(500),
  createMissing: z.boolean().default(false),
  subscribed: z.boolean().optional(),
});

export const removeMembersSchema = z.object({
  emails: z.array(emailSchema).min(1).max(500),
});
