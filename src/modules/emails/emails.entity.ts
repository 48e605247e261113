import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { EmailType } from './emails.service';

/** Where an email is in its delivery (`email_status_rank` orders them; FAILED, CANCELLED and SUPPRESSED were never sent). */
export type EmailStatus = 'QUEUED' | 'FAILED' | 'CANCELLED' | 'SUPPRESSED' | 'SENT' | 'DELIVERED' | 'OPENED' | 'CLICKED' | 'BOUNCED' | 'COMPLAINED';

/** One email to one contact: its rendered message (null for campaign mail until sent) and its delivery state. */
export class Email {
  [OptionalProps]?:
    | 'templateId'
    | 'campaignId'
    | 'fromName'
    | 'replyTo'
    | 'toName'
    | 'html'
    | 'text'
    | 'headers'
    | 'status'
    | 'providerMessageId'
    | 'attempts'
    | 'nextAttemptAt'
    | 'claimedUntil'
    | 'claimedBy'
    | 'lastError'
    | 'sentAt'
    | 'deliveredAt'
    | 'openedAt'
    | 'clickedAt'
    | 'bouncedAt'
    | 'complainedAt'
    | 'failedAt'
    | 'openCount'
    | 'clickCount'
    | 'variantId'
    | 'timeZone'
    | 'createdAt'
    | 'updatedAt';
  id!: string;
  projectId!: string;
  contactId!: string;
  templateId: string | null = null;
  campaignId: string | null = null;
  type!: EmailType;
  fromEmail!: string;
  fromName: string | null = null;
  replyTo: string | null = null;
  toEmail!: string;
  toName: string | null = null;
  subject!: string;
  html: string | null = null;
  text: string | null = null;
  headers: Record<string, string> = {};
  status: EmailStatus = 'QUEUED';
  messageId!: string;
  providerMessageId: string | null = null;
  attempts = 0;
  nextAttemptAt: Date = new Date();
  /** A dispatcher holds a queued email until then; a crashed one's claims simply expire. */
  claimedUntil: Date | null = null;
  /** The workflow id of the activity that claimed it, which takes back its own dead attempt's claims at once. */
  claimedBy: string | null = null;
  lastError: string | null = null;
  sentAt: Date | null = null;
  deliveredAt: Date | null = null;
  openedAt: Date | null = null;
  clickedAt: Date | null = null;
  bouncedAt: Date | null = null;
  complainedAt: Date | null = null;
  failedAt: Date | null = null;
  openCount = 0;
  clickCount = 0;
  /** The A/B test variant ("A", "B", ...) this campaign email carries; null outside an A/B test (and while held for the winner). */
  variantId: string | null = null;
  /** The recipient's time zone of a local-time campaign: its email goes out at the campaign's hour there. */
  timeZone: string | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

/** A file attached to an email, or shown inline in it (`contentId`), in its place among the others. */
export class EmailAttachment {
  [OptionalProps]?: 'contentId';
  id!: string;
  emailId!: string;
  position!: number;
  filename!: string;
  contentType!: string;
  contentId: string | null = null;
  disposition!: 'attachment' | 'inline';
  content!: Buffer;
}

export const EmailSchema = new EntitySchema<Email>({
  class: Email,
  tableName: 'emails',
  checks: [{ name: 'emails_status_check', expression: 'email_status_rank(status) IS NOT NULL' }],
  indexes: [
    { name: 'emails_project_created_idx', properties: ['projectId', 'createdAt'] },
    { name: 'emails_contact_idx', properties: ['contactId'] },
    { name: 'emails_message_id_idx', properties: ['messageId'] },
    // Partial indexes: MikroORM writes them only as SQL.
    {
      name: 'emails_campaign_idx',
      expression: 'CREATE INDEX emails_campaign_idx ON public.emails USING btree (campaign_id) WHERE (campaign_id IS NOT NULL)',
    },
    {
      name: 'emails_provider_message_idx',
      expression: 'CREATE INDEX emails_provider_message_idx ON public.emails USING btree (provider_message_id) WHERE (provider_message_id IS NOT NULL)',
    },
    {
      name: 'emails_queued_idx',
      expression: `CREATE INDEX emails_queued_idx ON public.emails USING btree (next_attempt_at) WHERE ((status = 'QUEUED'::text) AND (campaign_id IS NULL))`,
    },
    {
      name: 'emails_campaign_queued_idx',
      expression: `CREATE INDEX emails_campaign_queued_idx ON public.emails USING btree (campaign_id, contact_id) WHERE (status = 'QUEUED'::text)`,
    },
  ],
  uniques: [
    {
      name: 'emails_campaign_contact_key',
      expression: 'CREATE UNIQUE INDEX emails_campaign_contact_key ON public.emails USING btree (campaign_id, contact_id) WHERE (campaign_id IS NOT NULL)',
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('emails', 'project_id', 'Project'),
    contactId: cascadingReference('emails', 'contact_id', 'Contact'),
    templateId: { ...cascadingReference('emails', 'template_id', 'Template'), deleteRule: 'set null', nullable: true },
    campaignId: {
      ...cascadingReference('emails', 'campaign_id', 'Campaign'),
      foreignKeyName: 'emails_campaign_fk',
      deleteRule: 'set null',
      nullable: true,
    },
    type: { enum: true, items: ['TRANSACTIONAL', 'MARKETING', 'HEADLESS'], type: 'text' },
    fromEmail: { type: 'text' },
    fromName: { type: 'text', nullable: true },
    replyTo: { type: 'text', nullable: true },
    toEmail: { type: 'text' },
    toName: { type: 'text', nullable: true },
    subject: { type: 'text' },
    html: { type: 'text', nullable: true },
    text: { type: 'text', nullable: true },
    headers: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    // Not an enum CHECK: `emails_status_check` asks `email_status_rank`, which knows every status.
    status: { type: 'text', default: 'QUEUED' },
    messageId: { type: 'text' },
    providerMessageId: { type: 'text', nullable: true },
    attempts: { type: 'integer', default: 0 },
    nextAttemptAt: { ...timestampColumn },
    claimedUntil: { ...optionalTimestampColumn },
    claimedBy: { type: 'text', nullable: true },
    lastError: { type: 'text', nullable: true },
    sentAt: { ...optionalTimestampColumn },
    deliveredAt: { ...optionalTimestampColumn },
    openedAt: { ...optionalTimestampColumn },
    clickedAt: { ...optionalTimestampColumn },
    bouncedAt: { ...optionalTimestampColumn },
    complainedAt: { ...optionalTimestampColumn },
    failedAt: { ...optionalTimestampColumn },
    openCount: { type: 'integer', default: 0 },
    clickCount: { type: 'integer', default: 0 },
    variantId: { type: 'text', nullable: true },
    timeZone: { type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const EmailAttachmentSchema = new EntitySchema<EmailAttachment>({
  class: EmailAttachment,
  tableName: 'email_attachments',
  indexes: [{ name: 'email_attachments_email_idx', properties: ['emailId', 'position'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    emailId: cascadingReference('email_attachments', 'email_id', 'Email'),
    position: { type: 'integer' },
    filename: { type: 'text' },
    contentType: { type: 'text' },
    contentId: { type: 'text', nullable: true },
    disposition: { enum: true, items: ['attachment', 'inline'], type: 'text' },
    content: { type: 'blob', columnType: 'bytea' },
  },
});
