import { BigIntType, EntitySchema, OptionalProps } from '@mikro-orm/core';
import { optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/**
 * A recorded event routed to automations by the events trigger, in the event's own transaction: it
 * starts a workflow (`start`) or wakes a waiting execution (`wake`), and is deleted once handled.
 */
export class AutomationOutboxEntry {
  [OptionalProps]?: 'id' | 'workflowId' | 'executionId' | 'createdAt' | 'claimedUntil';
  /** bigserial: the order the rows were written in. */
  id!: string;
  kind!: 'start' | 'wake';
  projectId!: string;
  contactId!: string;
  eventId!: string;
  eventName!: string;
  eventData!: Record<string, unknown>;
  /** The workflow to start (`start`). */
  workflowId: string | null = null;
  /** The execution to wake (`wake`). */
  executionId: string | null = null;
  createdAt!: Date;
  /** Until when a dispatcher holds the row; after that another takes it. */
  claimedUntil: Date | null = null;
}

export const AutomationOutboxEntrySchema = new EntitySchema<AutomationOutboxEntry>({
  class: AutomationOutboxEntry,
  tableName: 'automation_outbox',
  properties: {
    id: { type: new BigIntType('string'), primary: true, autoincrement: true },
    kind: { enum: true, items: ['start', 'wake'], type: 'text' },
    projectId: { type: 'uuid' },
    contactId: { type: 'uuid' },
    eventId: { type: 'uuid' },
    eventName: { type: 'text' },
    eventData: { type: 'json', columnType: 'jsonb' },
    workflowId: { type: 'uuid', nullable: true },
    executionId: { type: 'uuid', nullable: true },
    createdAt: { ...timestampColumn },
    claimedUntil: { ...optionalTimestampColumn },
  },
});
