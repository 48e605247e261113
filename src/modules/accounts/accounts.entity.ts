import { EntitySchema, OptionalProps } from '@mikro-orm/core';

export type Role = 'OWNER' | 'ADMIN' | 'MEMBER';

export class User {
  [OptionalProps]?: 'emailVerified' | 'createdAt' | 'updatedAt';
  id!: string;
  email!: string;
  passwordHash!: string;
  emailVerified = false;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
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
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export class ProjectMember {
  [OptionalProps]?: 'createdAt';
  projectId!: string;
  userId!: string;
  role!: Role;
  createdAt: Date = new Date();
}

// Each property says what its column is in the migrated schema (type, default, constraint names), so
// MikroORM's schema diff against these entities is empty (test/integration/schema.test.ts).
const timestamp = { type: 'Date', columnType: 'timestamptz', defaultRaw: 'now()' } as const;

export const UserSchema = new EntitySchema<User>({
  class: User,
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    email: { type: 'text', unique: 'users_email_key' },
    passwordHash: { type: 'text' },
    emailVerified: { type: 'boolean', default: false },
    createdAt: { ...timestamp },
    updatedAt: { ...timestamp, onUpdate: () => new Date() },
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
    securityReviewedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    settings: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    createdAt: { ...timestamp },
    updatedAt: { ...timestamp, onUpdate: () => new Date() },
  },
});

/** A member's project and user: foreign keys whose values are the ids themselves (no entity loaded). */
const memberOf = (entity: 'User' | 'Project', column: string) =>
  ({
    kind: 'm:1',
    entity,
    mapToPk: true,
    primary: true,
    fieldName: column,
    foreignKeyName: `project_members_${column}_fkey`,
    deleteRule: 'cascade',
    updateRule: 'no action',
  }) as const;

export const ProjectMemberSchema = new EntitySchema<ProjectMember>({
  class: ProjectMember,
  tableName: 'project_members',
  indexes: [{ name: 'project_members_user_idx', properties: ['userId'] }],
  properties: {
    projectId: memberOf('Project', 'project_id'),
    userId: memberOf('User', 'user_id'),
    role: { enum: true, items: ['OWNER', 'ADMIN', 'MEMBER'], type: 'text' },
    createdAt: { ...timestamp },
  },
});

/** What createOrm registers for this module. */
export const accountEntities = [UserSchema, ProjectSchema, ProjectMemberSchema];
