import { z } from 'zod';
import { dateTime, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import type { toProjectDto, toUserDto } from './accounts.service';
import type { MemberDto } from './members.service';
import { projectSettingsSchema } from './project-settings';

const passwordSchema = z.string().min(8, 'Password must be at least 8 characters').max(200);

export const credentialsSchema = z.object({
  email: emailSchema,
  password: passwordSchema,
});

const tokenSchema = z.string().min(1).max(200);
export const verifyEmailSchema = z.object({ token: tokenSchema });
export const requestPasswordResetSchema = z.object({ email: emailSchema });
export const resetPasswordSchema = z.object({ token: tokenSchema, password: passwordSchema });

export const loginSchema = z.object({
  email: emailSchema,
  password: z.string().min(1).max(200),
});

export const createProjectSchema = z.object({
  name: z.string().trim().min(1).max(100),
});

export const updateProjectSchema = z.object({
  name: z.string().trim().min(1).max(100).optional(),
  settings: projectSettingsSchema.partial().optional(),
  tracking: z
    .object({ opens: z.boolean().optional(), clicks: z.boolean().optional() })
    .strict()
    .optional()
    .meta({ description: 'Open and click tracking of the project’s mail (settings.trackOpens / trackClicks)' }),
});

const roleSchema = z.enum(['OWNER', 'ADMIN', 'MEMBER']);
export const inviteMemberSchema = z.object({ email: emailSchema, role: roleSchema.default('MEMBER') });
export const changeRoleSchema = z.object({ role: roleSchema });

export const userResponse = z.object({ id: z.string(), email: z.string(), emailVerified: z.boolean(), createdAt: dateTime, updatedAt: dateTime });
sameShape<z.output<typeof userResponse>, ReturnType<typeof toUserDto>>(true);

export const projectResponse = z.object({
  id: z.string(),
  name: z.string(),
  publicKey: z.string().meta({ description: 'pk_…, for POST /v1/track' }),
  secretKey: z.string().meta({ description: 'sk_…, for every other API endpoint' }),
  disabled: z.boolean(),
  disabledReason: z.string().nullable(),
  settings: projectSettingsSchema,
  tracking: z.object({ opens: z.boolean(), clicks: z.boolean() }),
  createdAt: dateTime,
  updatedAt: dateTime,
  role: roleSchema.optional().meta({ description: 'The caller’s role in the project' }),
});
sameShape<z.output<typeof projectResponse>, ReturnType<typeof toProjectDto>>(true);

export const memberResponse = z.object({
  id: z.string().meta({ description: 'The user’s id, or the invitation’s while it waits' }),
  userId: z.string().nullable(),
  email: z.string(),
  role: roleSchema,
  status: z.enum(['ACTIVE', 'INVITED']),
  createdAt: dateTime,
});
sameShape<z.output<typeof memberResponse>, MemberDto>(true);

const setupSteps = ['verifiedDomain', 'contact', 'event', 'template', 'emailSent', 'campaign', 'workflowEnabled'] as const;
export const setupStateResponse = z.object({
  steps: z.object(Object.fromEntries(setupSteps.map((s) => [s, z.boolean()])) as Record<(typeof setupSteps)[number], z.ZodBoolean>),
  completed: z.number().int(),
  total: z.number().int(),
  done: z.boolean(),
});
