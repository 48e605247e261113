import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { deliveryStatus } from './webhook-endpoints.schemas';

/** One event's webhook to one endpoint: the body it posts, its attempts so far and when the next one is due. */
export class WebhookDelivery {
  [OptionalProps]?: 'eventId' | 'status' | 'attempts' | 'lastStatusCode' | 'lastError' | 'nextAttemptAt' | 'claimedUntil' | 'createdAt' | 'deliveredAt';
  id!: string;
  endpointId!: string;
  projectId!: string;
  /** The recorded event it carries; null for an endpoint's test delivery. */
  eventId: string | null = null;
  eventType!: string;
  body!: string;
  status: (typeof deliveryStatus)[number] = 'PENDING';
  attempts = 0;
  lastStatusCode: number | null = null;
  lastError: string | null = null;
  nextAttemptAt: Date = new Date();
  /** Until when a dispatcher holds the delivery; after that another takes it. */
  claimedUntil: Date | null = null;
  createdAt!: Date;
  deliveredAt: Date | null = null;
}

export const WebhookDeliverySchema = new EntitySchema<WebhookDelivery>({
  class: WebhookDelivery,
  tableName: 'webhook_deliveries',
  // Partial and descending indexes: MikroORM writes them only as SQL.
  indexes: [
    {
      name: 'webhook_deliveries_due_idx',
      expression: `CREATE INDEX webhook_deliveries_due_idx ON public.webhook_deliveries USING btree (next_attempt_at) WHERE (status = 'PENDING'::text)`,
    },
    {
      name: 'webhook_deliveries_endpoint_idx',
      expression: 'CREATE INDEX webhook_deliveries_endpoint_idx ON public.webhook_deliveries USING btree (endpoint_id, created_at DESC, id DESC)',
    },
    {
      name: 'webhook_deliveries_endpoint_due_idx',
      expression:
        `CREATE INDEX webhook_deliveries_endpoint_due_idx ON public.webhook_deliveries USING btree (endpoint_id, next_attempt_at) ` +
        `WHERE (status = 'PENDING'::text)`,
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    endpointId: cascadingReference('webhook_deliveries', 'endpoint_id', 'WebhookEndpoint'),
    projectId: { type: 'uuid' },
    eventId: { type: 'uuid', nullable: true },
    eventType: { type: 'text' },
    body: { type: 'text' },
    // No CHECK in the table: a plain text column.
    status: { type: 'text', default: 'PENDING' },
    attempts: { type: 'integer', default: 0 },
    lastStatusCode: { type: 'integer', nullable: true },
    lastError: { type: 'text', nullable: true },
    nextAttemptAt: { ...timestampColumn },
    claimedUntil: { ...optionalTimestampColumn },
    createdAt: { ...timestampColumn },
    deliveredAt: { ...optionalTimestampColumn },
  },
});
