import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../../db/entity-columns';

/** One header line of a received message, in the order it came. */
export interface ReceivedHeader {
  name: string;
  value: string;
}

/** What a received message carried as attachments (the content stays in the raw message). */
export interface ReceivedAttachment {
  filename: string | null;
  contentType: string;
  size: number;
}

/**
 * A message received at a verified sender domain's inbound host (`inbound.<domain>`): what it said, parsed and
 * cleaned of NUL, with the original bytes, and the sent email it answers when its In-Reply-To or References names one.
 */
export class InboundEmail {
  [OptionalProps]?: 'emailId' | 'envelopeFrom' | 'receivedAt';
  id!: string;
  projectId!: string;
  /** The message's own Message-ID, else a digest of its bytes: a relay sending it again stores nothing twice. */
  messageKey!: string;
  from!: string;
  to!: string[];
  cc!: string[];
  subject!: string;
  text!: string | null;
  html!: string | null;
  headers!: ReceivedHeader[];
  attachments!: ReceivedAttachment[];
  emailId: string | null = null;
  contactId!: string;
  envelopeFrom: string | null = null;
  envelopeTo!: string;
  sizeBytes!: number;
  raw!: Buffer;
  receivedAt!: Date;
}

export const InboundEmailSchema = new EntitySchema<InboundEmail>({
  class: InboundEmail,
  tableName: 'inbound_emails',
  indexes: [
    { name: 'inbound_emails_project_received_idx', properties: ['projectId', 'receivedAt', 'id'] },
    { name: 'inbound_emails_received_idx', properties: ['receivedAt'] },
  ],
  uniques: [{ name: 'inbound_emails_project_key_idx', properties: ['projectId', 'messageKey'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('inbound_emails', 'project_id', 'Project'),
    messageKey: { type: 'text' },
    from: { type: 'text', fieldName: 'from_address' },
    to: { type: 'json', columnType: 'jsonb', fieldName: 'to_addresses' },
    cc: { type: 'json', columnType: 'jsonb', fieldName: 'cc_addresses' },
    subject: { type: 'text' },
    text: { type: 'text', nullable: true },
    html: { type: 'text', nullable: true },
    headers: { type: 'json', columnType: 'jsonb' },
    attachments: { type: 'json', columnType: 'jsonb' },
    // No foreign key: deleting an email leaves the reply to it.
    emailId: { type: 'uuid', nullable: true },
    contactId: cascadingReference('inbound_emails', 'contact_id', 'Contact'),
    envelopeFrom: { type: 'text', nullable: true },
    envelopeTo: { type: 'text' },
    sizeBytes: { type: 'integer' },
    raw: { type: 'Buffer', columnType: 'bytea', lazy: true },
    receivedAt: { ...timestampColumn },
  },
});
