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
  [OptionalProps]?: 'disabled' | 'disabledReason' | 'settings' | 'createdAt' | 'updatedAt';
  id!: string;
  name!: string;
  publicKey!: string;
  secretKey!: string;
  disabled = false;
  disabledReason: string | null = null;
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

export const UserSchema = new EntitySchema<User>({
  class: User,
  tableName: 'users',
  properties: {
    id: { type: 'uuid', primary: true },
    email: { type: 'text', unique: true },
    passwordHash: { type: 'text' },
    emailVerified: { type: 'boolean' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
  },
});

export const ProjectSchema = new EntitySchema<Project>({
  class: Project,
  tableName: 'projects',
  properties: {
    id: { type: 'uuid', primary: true },
    name: { type: 'text' },
    publicKey: { type: 'text', unique: true },
    secretKey: { type: 'text', unique: true },
    disabled: { type: 'boolean' },
    disabledReason: { type: 'text', nullable: true },
    settings: { type: 'json' },
    createdAt: { type: 'Date' },
    updatedAt: { type: 'Date', onUpdate: () => new Date() },
  },
});

export const ProjectMemberSchema = new EntitySchema<ProjectMember>({
  class: ProjectMember,
  tableName: 'project_members',
  properties: {
    projectId: { type: 'uuid', primary: true },
    userId: { type: 'uuid', primary: true },
    role: { type: 'text' },
    createdAt: { type: 'Date' },
  },
});

/** What createOrm registers for this module. */
export const accountEntities = [UserSchema, ProjectSchema, ProjectMemberSchema];
