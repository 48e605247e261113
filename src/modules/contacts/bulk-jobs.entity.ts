import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { BulkKind } from './bulk-jobs';

/** A bulk subscribe, unsubscribe or delete job: the contacts it covers and its pollable progress. */
export class BulkJob {
  [OptionalProps]?: 'topicId' | 'status' | 'processed' | 'changed' | 'unchanged' | 'notFound' | 'createdAt' | 'updatedAt' | 'completedAt';
  id!: string;
  projectId!: string;
  kind!: BulkKind;
  /** Subscribe or unsubscribe to this topic rather than to marketing mail as a whole. */
  topicId: string | null = null;
  status: 'QUEUED' | 'RUNNING' | 'COMPLETED' = 'QUEUED';
  contactIds!: string[];
  processed = 0;
  changed = 0;
  unchanged = 0;
  /** The ids among contactIds that the project has no contact for. */
  notFound: string[] = [];
  createdAt!: Date;
  updatedAt!: Date;
  completedAt: Date | null = null;
}

export const BulkJobSchema = new EntitySchema<BulkJob>({
  class: BulkJob,
  tableName: 'bulk_jobs',
  indexes: [{ name: 'bulk_jobs_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('bulk_jobs', 'project_id', 'Project'),
    kind: { enum: true, items: ['subscribe', 'unsubscribe', 'delete'], type: 'text' },
    // No foreign key: a job whose topic was deleted changes nothing more.
    topicId: { type: 'uuid', nullable: true },
    status: { enum: true, items: ['QUEUED', 'RUNNING', 'COMPLETED'], type: 'text', default: 'QUEUED' },
    contactIds: { type: 'string[]', columnType: 'uuid[]' },
    processed: { type: 'integer', default: 0 },
    changed: { type: 'integer', default: 0 },
    unchanged: { type: 'integer', default: 0 },
    notFound: { type: 'string[]', columnType: 'uuid[]', defaultRaw: `'{}'::uuid[]` },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
    completedAt: { ...optionalTimestampColumn },
  },
});
