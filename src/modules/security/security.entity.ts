import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/** A suspension of a project for its bounce or complaint rate: the figures it was judged on, and when it was lifted. */
export class ProjectSuspension {
  [OptionalProps]?: 'createdAt' | 'liftedAt' | 'liftedBy';
  id!: string;
  projectId!: string;
  metric!: 'bounce' | 'complaint';
  rate!: number;
  threshold!: number;
  /** Bigints, read as text. */
  sent!: string;
  bounced!: string;
  complained!: string;
  windowStart!: Date;
  reason!: string;
  createdAt!: Date;
  liftedAt: Date | null = null;
  liftedBy: string | null = null;
}

export const ProjectSuspensionSchema = new EntitySchema<ProjectSuspension>({
  class: ProjectSuspension,
  tableName: 'project_suspensions',
  indexes: [{ name: 'project_suspensions_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('project_suspensions', 'project_id', 'Project'),
    metric: { enum: true, items: ['bounce', 'complaint'], type: 'text' },
    rate: { type: 'double' },
    threshold: { type: 'double' },
    sent: { type: 'bigint', runtimeType: 'string' },
    bounced: { type: 'bigint', runtimeType: 'string' },
    complained: { type: 'bigint', runtimeType: 'string' },
    windowStart: { type: 'Date', columnType: 'timestamptz' },
    reason: { type: 'text' },
    createdAt: { ...timestampColumn },
    liftedAt: { ...optionalTimestampColumn },
    liftedBy: { type: 'text', nullable: true },
  },
});
