import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../../db/entity-columns';

export const TOPIC_DEFAULTS = ['opt_in', 'opt_out'] as const;
export type TopicDefault = (typeof TOPIC_DEFAULTS)[number];

export const TOPIC_STATES = ['subscribed', 'unsubscribed', 'pending'] as const;
export type TopicState = (typeof TOPIC_STATES)[number];

/**
 * A kind of marketing mail a contact can take or leave (a newsletter, product news). opt_in: every
 * contact receives it unless it left; opt_out: only contacts that joined it.
 */
export class Topic {
  [OptionalProps]?: 'description' | 'defaultSubscription' | 'public' | 'doubleOptIn' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  name!: string;
  description: string | null = null;
  defaultSubscription: TopicDefault = 'opt_in';
  /** Listed in the preference center. */
  public = true;
  /** Whether joining waits for an emailed confirmation; null follows the project's `settings.doubleOptIn`. */
  doubleOptIn: boolean | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

/** A contact's own choice for a topic; without a row the topic's default applies. */
export class ContactTopic {
  [OptionalProps]?: 'updatedAt';
  contactId!: string;
  topicId!: string;
  projectId!: string;
  state!: TopicState;
  updatedAt!: Date;
}

export const TopicSchema = new EntitySchema<Topic>({
  class: Topic,
  tableName: 'topics',
  uniques: [{ name: 'topics_project_id_name_unique', properties: ['projectId', 'name'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('topics', 'project_id', 'Project'),
    name: { type: 'text' },
    description: { type: 'text', nullable: true },
    defaultSubscription: { enum: true, items: [...TOPIC_DEFAULTS], type: 'text', default: 'opt_in' },
    public: { type: 'boolean', default: true },
    doubleOptIn: { type: 'boolean', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const ContactTopicSchema = new EntitySchema<ContactTopic>({
  class: ContactTopic,
  tableName: 'contact_topics',
  // Who receives a topic: the audience query's anti-join reads the primary key, counts by state this.
  indexes: [{ name: 'contact_topics_topic_id_state_index', properties: ['topicId', 'state'] }],
  properties: {
    contactId: cascadingReference('contact_topics', 'contact_id', 'Contact', { primary: true }),
    topicId: cascadingReference('contact_topics', 'topic_id', 'Topic', { primary: true }),
    // No foreign key: the project is the contact's and the topic's, copied for lookups by project.
    projectId: { type: 'uuid' },
    state: { enum: true, items: [...TOPIC_STATES], type: 'text' },
    updatedAt: { ...timestampColumn },
  },
});
