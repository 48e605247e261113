import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/** A CSV import: the uploaded file (kept until the import completes), the position reached and the outcome so far. */
export class ContactImport {
  [OptionalProps]?:
    | 'filename'
    | 'sizeBytes'
    | 'content'
    | 'status'
    | 'offsetBytes'
    | 'nextLine'
    | 'columns'
    | 'emailColumn'
    | 'rows'
    | 'created'
    | 'updated'
    | 'invalid'
    | 'errors'
    | 'error'
    | 'createdAt'
    | 'updatedAt'
    | 'completedAt'
    | 'topicIds'
    | 'doubleOptIn';
  id!: string;
  projectId!: string;
  filename: string | null = null;
  sizeBytes = 0;
  /** The file itself, read in slices from offsetBytes on; null once the import is over. */
  content: Buffer | null = null;
  status: 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' = 'QUEUED';
  offsetBytes = 0;
  nextLine = 1;
  /** The header row's column names, once read. */
  columns: string[] | null = null;
  emailColumn: number | null = null;
  rows = 0;
  created = 0;
  updated = 0;
  invalid = 0;
  errors: Array<{ line: number; error: string }> = [];
  error: string | null = null;
  createdAt!: Date;
  updatedAt!: Date;
  completedAt: Date | null = null;
  /** Topics every imported contact joins (one that already chose in a topic keeps its choice). */
  topicIds: string[] = [];
  /** Joins wait for an emailed confirmation where double opt-in applies; otherwise the importer vouches for consent. */
  doubleOptIn = false;
}

export const ContactImportSchema = new EntitySchema<ContactImport>({
  class: ContactImport,
  tableName: 'contact_imports',
  indexes: [{ name: 'contact_imports_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('contact_imports', 'project_id', 'Project'),
    filename: { type: 'text', nullable: true },
    sizeBytes: { type: 'integer', default: 0 },
    // Up to the whole file: loaded only when asked for.
    content: { type: 'blob', columnType: 'bytea', nullable: true, lazy: true },
    status: { enum: true, items: ['QUEUED', 'RUNNING', 'COMPLETED', 'FAILED'], type: 'text', default: 'QUEUED' },
    offsetBytes: { type: 'integer', default: 0 },
    nextLine: { type: 'integer', default: 1 },
    columns: { type: 'string[]', columnType: 'text[]', nullable: true },
    emailColumn: { type: 'integer', nullable: true },
    rows: { type: 'integer', default: 0 },
    created: { type: 'integer', default: 0 },
    updated: { type: 'integer', default: 0 },
    invalid: { type: 'integer', default: 0 },
    errors: { type: 'json', columnType: 'jsonb', defaultRaw: `'[]'::jsonb` },
    error: { type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
    completedAt: { ...optionalTimestampColumn },
    // No foreign key: an import whose topic was deleted joins the others.
    topicIds: { type: 'string[]', columnType: 'uuid[]', defaultRaw: `'{}'::uuid[]` },
    doubleOptIn: { type: 'boolean', default: false },
  },
});
