import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { TokenPurpose } from './account-emails';

export type Role = 'OWNER' | 'ADMIN' | 'MEMBER';

export class User {
  [OptionalProps]?: 'emailVerified' | 'createdAt' | 'updatedAt';
  id!: string;
  email!: string;
  passwordHash!: string;
  emailVerified = false;
  createdAt!: Date;
  updatedAt!: Date;
}

export class Project {
  [OptionalProps]?: 'disabled' | 'disabledReason' | 'securityReviewedAt' | 'settings' | 'createdAt' | 'updatedAt';
  id!: string;
  name!: string;
  publicKey!: string;
  secretKey!: string;
  disabled = false;
  disabledReason: string | null = null;
  /** When an operator last reinstated the project after a suspension (its rates are judged from then on). */
  securityReviewedAt: Date | null = null;
  settings: Record<string, unknown> = {};
  createdAt!: Date;
  updatedAt!: Date;
}

export class ProjectMember {
  [OptionalProps]?: 'createdAt';
  projectId!: string;
  userId!: string;
  role!: Role;
  createdAt!: Date;
}

/** A single-use, expiring token mailed to a user (email verification, password reset), kept only as its hash. */
export class AuthToken {
  [OptionalProps]?: 'usedAt' | 'createdAt';
  tokenHash!: string;
  userId!: string;
  purpose!: TokenPurpose;
  expiresAt!: Date;
  usedAt: Date | null = null;
  createdAt!: Date;
}

/** An invitation to a project for an address that has no verified account yet. */
export class ProjectInvite {
  [OptionalProps]?: 'invitedBy' | 'createdAt';
  id!: string;
  projectId!: string;
  email!: string;
  role!: Role;
  /** The user who invited; null once their account is gone. */
  invitedBy: string | null = null;
  createdAt!: Date;
}

// Each property says what its column is in the migrated schema (type, default, constraint names), so
// MikroORM's schema diff against these entities is empty (test/integration/schema.test.ts).

export const UserSchema = new EntitySchema<User>({
  class: User,
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    email: { type: 'text', unique: 'users_email_key' },
    passwordHash: { type: 'text' },
    emailVerified: { type: 'boolean', default: false },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const ProjectSchema = new EntitySchema<Project>({
  class: Project,
  tableName: 'projects',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'text' },
    publicKey: { type: 'text', unique: 'projects_public_key_key' },
    secretKey: { type: 'text', unique: 'projects_secret_key_key' },
    disabled: { type: 'boolean', default: false },
    disabledReason: { type: 'text', nullable: true },
    securityReviewedAt: { ...optionalTimestampColumn },
    settings: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const ProjectMemberSchema = new EntitySchema<ProjectMember>({
  class: ProjectMember,
  tableName: 'project_members',
  indexes: [{ name: 'project_members_user_idx', properties: ['userId'] }],
  properties: {
    projectId: cascadingReference('project_members', 'project_id', 'Project', { primary: true }),
    userId: cascadingReference('project_members', 'user_id', 'User', { primary: true }),
    role: { enum: true, items: ['OWNER', 'ADMIN', 'MEMBER'], type: 'text' },
    createdAt: { ...timestampColumn },
  },
});

export const AuthTokenSchema = new EntitySchema<AuthToken>({
  class: AuthToken,
  tableName: 'auth_tokens',
  indexes: [{ name: 'auth_tokens_user_idx', properties: ['userId', 'purpose'] }],
  properties: {
    tokenHash: { type: 'text', primary: true },
    userId: cascadingReference('auth_tokens', 'user_id', 'User'),
    purpose: { enum: true, items: ['verify_email', 'reset_password'], type: 'text' },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    usedAt: { ...optionalTimestampColumn },
    createdAt: { ...timestampColumn },
  },
});

export const ProjectInviteSchema = new EntitySchema<ProjectInvite>({
  class: ProjectInvite,
  tableName: 'project_invites',
  uniques: [{ name: 'project_invites_project_id_email_key', properties: ['projectId', 'email'] }],
  indexes: [{ name: 'project_invites_email_idx', properties: ['email'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('project_invites', 'project_id', 'Project'),
    email: { type: 'text' },
    role: { enum: true, items: ['OWNER', 'ADMIN', 'MEMBER'], type: 'text' },
    invitedBy: { ...cascadingReference('project_invites', 'invited_by', 'User'), deleteRule: 'set null', nullable: true },
    createdAt: { ...timestampColumn },
  },
});

/** What createOrm registers for this module. */
export const accountEntities = [UserSchema, ProjectSchema, ProjectMemberSchema, AuthTokenSchema, ProjectInviteSchema];
