import { z } from 'zod';
import { emailSchema } from '../../http/validate';
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
});

const roleSchema = z.enum(['OWNER', 'ADMIN', 'MEMBER']);
export const inviteMemberSchema = z.object({ email: emailSchema, role: roleSchema.default('MEMBER') });
export const changeRoleSchema = z.object({ role: roleSchema });
