import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

export const IMPORT_STATUSES = ['QUEUED', 'RUNNING', 'COMPLETED', 'FAILED'] as const;

/** A CSV of addresses to suppress: the uploaded file (kept until the import ends), the position reached and the counts so far. */
export class SuppressionImport {
  [OptionalProps]?:
    | 'filename'
    | 'sizeBytes'
    | 'content'
    | 'status'
    | 'offsetBytes'
    | 'nextLine'
    | 'emailColumn'
    | 'rows'
    | 'added'
    | 'alreadyListed'
    | 'invalid'
    | 'errors'
    | 'error'
    | 'createdAt'
    | 'updatedAt'
    | 'completedAt';
  id!: string;
  projectId!: string;
  filename: string | null = null;
  sizeBytes = 0;
  /** The file itself, read in slices from offsetBytes on; null once the import is over. */
  content: Buffer | null = null;
  status: (typeof IMPORT_STATUSES)[number] = 'QUEUED';
  offsetBytes = 0;
  nextLine = 1;
  /** Which column holds the address, once the first line was read. */
  emailColumn: number | null = null;
  rows = 0;
  added = 0;
  alreadyListed = 0;
  invalid = 0;
  errors: Array<{ line: number; error: string }> = [];
  error: string | null = null;
  createdAt!: Date;
  updatedAt!: Date;
  completedAt: Date | null = null;
}

export const SuppressionImportSchema = new EntitySchema<SuppressionImport>({
  class: SuppressionImport,
  tableName: 'suppression_imports',
  indexes: [{ name: 'suppression_imports_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('suppression_imports', 'project_id', 'Project'),
    filename: { type: 'text', nullable: true },
    sizeBytes: { type: 'integer', default: 0 },
    // Up to the whole file: loaded only when asked for.
    content: { type: 'blob', columnType: 'bytea', nullable: true, lazy: true },
    status: { enum: true, items: [...IMPORT_STATUSES], type: 'text', default: 'QUEUED' },
    offsetBytes: { type: 'integer', default: 0 },
    nextLine: { type: 'integer', default: 1 },
    emailColumn: { type: 'integer', nullable: true },
    rows: { type: 'integer', default: 0 },
    added: { type: 'integer', default: 0 },
    alreadyListed: { type: 'integer', default: 0 },
    invalid: { type: 'integer', default: 0 },
    errors: { type: 'json', columnType: 'jsonb', defaultRaw: `'[]'::jsonb` },
    error: { type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
    completedAt: { ...optionalTimestampColumn },
  },
});
