import { BigIntType, EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference } from '../../db/entity-columns';

/** Part of a project's contact count, by shard: the fold adds the deltas to shard 0; the others hold older counts. */
export class ContactCount {
  projectId!: string;
  shard!: number;
  /** bigint, as a string. */
  n!: string;
}

/** A net change to a project's contact count by one statement, written by the contacts triggers until the fold moves it. */
export class ContactCountDelta {
  [OptionalProps]?: 'id';
  /** bigserial: the order the deltas were written in. */
  id!: string;
  projectId!: string;
  /** bigint, as a string. */
  n!: string;
}

export const ContactCountSchema = new EntitySchema<ContactCount>({
  class: ContactCount,
  tableName: 'contact_counts',
  properties: {
    projectId: cascadingReference('contact_counts', 'project_id', 'Project', { primary: true }),
    shard: { type: 'smallint', primary: true },
    n: { type: new BigIntType('string') },
  },
});

export const ContactCountDeltaSchema = new EntitySchema<ContactCountDelta>({
  class: ContactCountDelta,
  tableName: 'contact_count_deltas',
  indexes: [{ name: 'contact_count_deltas_project_idx', properties: ['projectId'] }],
  properties: {
    id: { type: new BigIntType('string'), primary: true, autoincrement: true },
    // No foreign key: a project's cascaded deletes write deltas while the project row is going away.
    projectId: { type: 'uuid' },
    n: { type: new BigIntType('string') },
  },
});
