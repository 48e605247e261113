import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { timestampColumn } from '../../db/entity-columns';

/** A message the development SMTP server captured, raw, with its envelope and the headers it is listed by. */
export class DevMailboxMessage {
  [OptionalProps]?: 'receivedAt' | 'envelopeFrom' | 'subject' | 'messageId';
  id!: string;
  receivedAt!: Date;
  envelopeFrom: string | null = null;
  envelopeTo!: string[];
  subject: string | null = null;
  messageId: string | null = null;
  raw!: Buffer;
}

export const DevMailboxMessageSchema = new EntitySchema<DevMailboxMessage>({
  class: DevMailboxMessage,
  tableName: 'dev_mailbox_messages',
  indexes: [
    // Newest first: MikroORM writes a descending index only as SQL.
    {
      name: 'dev_mailbox_received_idx',
      expression: 'CREATE INDEX dev_mailbox_received_idx ON public.dev_mailbox_messages USING btree (received_at DESC)',
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    receivedAt: { ...timestampColumn },
    envelopeFrom: { type: 'text', nullable: true },
    envelopeTo: { type: 'string[]', columnType: 'text[]' },
    subject: { type: 'text', nullable: true },
    messageId: { type: 'text', nullable: true },
    raw: { type: 'blob', columnType: 'bytea' },
  },
});
