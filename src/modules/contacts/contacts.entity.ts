import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/** A project's contact: one per email address, with their data and subscription. */
export class Contact {
  [OptionalProps]?: 'snoozedUntil' | 'data' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  email!: string;
  subscribed!: boolean;
  snoozedUntil: Date | null = null;
  data: Record<string, unknown> = {};
  createdAt!: Date;
  updatedAt!: Date;
}

export const ContactSchema = new EntitySchema<Contact>({
  class: Contact,
  tableName: 'contacts',
  uniques: [{ name: 'contacts_project_email_key', properties: ['projectId', 'email'] }],
  indexes: [
    { name: 'contacts_project_created_idx', properties: ['projectId', 'createdAt', 'id'] },
    { name: 'contacts_project_subscribed_idx', properties: ['projectId', 'subscribed'] },
    // Substring search on addresses, and `data @>` filters: index types MikroORM writes only as SQL.
    { name: 'contacts_email_trgm_idx', expression: 'CREATE INDEX contacts_email_trgm_idx ON public.contacts USING gin (email gin_trgm_ops)' },
    { name: 'contacts_data_idx', expression: 'CREATE INDEX contacts_data_idx ON public.contacts USING gin (data jsonb_path_ops)' },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('contacts', 'project_id', 'Project'),
    email: { type: 'text' },
    subscribed: { type: 'boolean' },
    snoozedUntil: { ...optionalTimestampColumn },
    data: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});
