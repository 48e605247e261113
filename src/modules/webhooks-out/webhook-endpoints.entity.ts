import { ArrayType, EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/**
 * A text[] written with every element quoted: MikroORM's own literal leaves an element such as `null`
 * bare, which PostgreSQL reads as NULL.
 */
class QuotedTextArrayType extends ArrayType<string> {
  override convertToDatabaseValue(value: string[] | null): string | null {
    if (!Array.isArray(value)) return value;
    return `{${value.map((v) => `"${v.replace(/[\\"]/g, (c) => `\\${c}`)}"`).join(',')}}`;
  }
}

/** A project's endpoint for webhooks out: where events go, which ones, and the secrets that sign them. */
export class WebhookEndpoint {
  [OptionalProps]?:
    'events' | 'description' | 'enabled' | 'previousSecret' | 'previousSecretExpiresAt' | 'failingSince' | 'disabledReason' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  url!: string;
  /** Event names or `prefix.*` patterns; null: every event. */
  events: string[] | null = null;
  description: string | null = null;
  enabled = true;
  secret!: string;
  previousSecret: string | null = null;
  previousSecretExpiresAt: Date | null = null;
  failingSince: Date | null = null;
  disabledReason: string | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

export const WebhookEndpointSchema = new EntitySchema<WebhookEndpoint>({
  class: WebhookEndpoint,
  tableName: 'webhook_endpoints',
  indexes: [{ name: 'webhook_endpoints_project_idx', properties: ['projectId', 'createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('webhook_endpoints', 'project_id', 'Project'),
    url: { type: 'text' },
    events: { type: QuotedTextArrayType, columnType: 'text[]', nullable: true },
    description: { type: 'text', nullable: true },
    enabled: { type: 'boolean', default: true },
    secret: { type: 'text' },
    previousSecret: { type: 'text', nullable: true },
    previousSecretExpiresAt: { ...optionalTimestampColumn },
    failingSince: { ...optionalTimestampColumn },
    disabledReason: { type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});
