import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/**
 * One double opt-in request and, once its link is followed, the proof of consent: what was asked for,
 * when, from where, and when and from where it was confirmed. Kept after confirmation as the record.
 */
export class ConsentConfirmation {
  [OptionalProps]?: 'requestedAt' | 'requestedIp' | 'requestedUserAgent' | 'mailedAt' | 'emailId' | 'confirmedAt' | 'confirmedIp' | 'confirmedUserAgent';
  id!: string;
  projectId!: string;
  contactId!: string;
  /** The topics asked for (ids of the project's topics); confirming subscribes those of them still pending. */
  topicIds!: string[];
  /** Confirmation also sets the contact's global `subscribed` (a signup through the form). */
  subscribeAll!: boolean;
  /** What asked: `subscribe_form`, `api`. */
  source!: string;
  requestedAt!: Date;
  requestedIp: string | null = null;
  requestedUserAgent: string | null = null;
  /** When the confirmation mail was queued; null when none was sent (rate limit, recent confirmation, no sender). */
  mailedAt: Date | null = null;
  /** The confirmation mail: complaints about it never count toward a suspension (anyone can have it sent). */
  emailId: string | null = null;
  expiresAt!: Date;
  confirmedAt: Date | null = null;
  confirmedIp: string | null = null;
  confirmedUserAgent: string | null = null;
}

export const ConsentConfirmationSchema = new EntitySchema<ConsentConfirmation>({
  class: ConsentConfirmation,
  tableName: 'consent_confirmations',
  indexes: [
    { name: 'consent_confirmations_contact_idx', properties: ['contactId', 'requestedAt'] },
    { name: 'consent_confirmations_email_idx', properties: ['emailId'] },
    { name: 'consent_confirmations_project_mailed_idx', properties: ['projectId', 'mailedAt'] },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('consent_confirmations', 'project_id', 'Project'),
    contactId: cascadingReference('consent_confirmations', 'contact_id', 'Contact'),
    topicIds: { type: 'json', columnType: 'jsonb', defaultRaw: `'[]'::jsonb` },
    subscribeAll: { type: 'boolean' },
    source: { type: 'text' },
    requestedAt: { ...timestampColumn },
    requestedIp: { type: 'text', nullable: true },
    requestedUserAgent: { type: 'text', nullable: true },
    mailedAt: { ...optionalTimestampColumn },
    emailId: { type: 'uuid', nullable: true },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    confirmedAt: { ...optionalTimestampColumn },
    confirmedIp: { type: 'text', nullable: true },
    confirmedUserAgent: { type: 'text', nullable: true },
  },
});
