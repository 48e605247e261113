import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from './entity-columns';

/** A project's idempotency key: the request that claimed it, and the answer it got once it has one. */
export class IdempotencyKey {
  [OptionalProps]?: 'statusCode' | 'response' | 'createdAt';
  projectId!: string;
  key!: string;
  request!: string;
  /** The status the request answered; null while it runs (or after its process died). */
  statusCode: number | null = null;
  /** What the request answered, where its handler kept it (SMTP submissions). */
  response: unknown = null;
  createdAt!: Date;
}

export const IdempotencyKeySchema = new EntitySchema<IdempotencyKey>({
  class: IdempotencyKey,
  tableName: 'idempotency_keys',
  indexes: [{ name: 'idempotency_keys_created_idx', properties: ['createdAt'] }],
  properties: {
    projectId: cascadingReference('idempotency_keys', 'project_id', 'Project', { primary: true }),
    key: { type: 'text', primary: true },
    request: { type: 'text' },
    statusCode: { type: 'integer', nullable: true },
    response: { type: 'json', columnType: 'jsonb', nullable: true },
    createdAt: { ...timestampColumn },
  },
});
