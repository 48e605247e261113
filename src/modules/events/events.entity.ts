import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../../db/entity-columns';

/** An event recorded for a contact: its name and data, as automations, segments and webhooks read it. */
export class ContactEvent {
  [OptionalProps]?: 'data' | 'createdAt';
  id!: string;
  projectId!: string;
  contactId!: string;
  name!: string;
  data: Record<string, unknown> = {};
  createdAt!: Date;
}

export const ContactEventSchema = new EntitySchema<ContactEvent>({
  class: ContactEvent,
  tableName: 'events',
  indexes: [
    { name: 'events_project_created_idx', properties: ['projectId', 'createdAt', 'id'] },
    { name: 'events_project_name_created_idx', properties: ['projectId', 'name', 'createdAt'] },
    { name: 'events_project_contact_name_idx', properties: ['projectId', 'contactId', 'name', 'createdAt'] },
    { name: 'events_contact_idx', properties: ['contactId'] },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('events', 'project_id', 'Project'),
    contactId: cascadingReference('events', 'contact_id', 'Contact'),
    name: { type: 'text' },
    data: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    createdAt: { ...timestampColumn },
  },
});
