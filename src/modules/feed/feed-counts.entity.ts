import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference } from '../../db/entity-columns';
import type { CountSource } from './feed-counts';

/** A project's count of recorded events of one name, or accepted emails of one type, in one UTC hour. */
export class ActivityCount {
  [OptionalProps]?: 'variant';
  projectId!: string;
  source!: CountSource;
  hour!: Date;
  name!: string;
  /** email.bounce: the bounce type (permanent, transient, undetermined); accepted emails: the email type. */
  variant = '';
  n!: number;
}

/** The same count as `ActivityCount`, by UTC day. */
export class ActivityCountDaily {
  [OptionalProps]?: 'variant';
  projectId!: string;
  source!: CountSource;
  day!: Date;
  name!: string;
  variant = '';
  n!: number;
}

/** A signed change to an hourly count, appended by a trigger until the fold adds it to the counts. */
export class ActivityCountDelta {
  [OptionalProps]?: 'id' | 'variant';
  id!: string;
  projectId!: string;
  source!: CountSource;
  hour!: Date;
  name!: string;
  variant = '';
  n!: number;
}

/** The count columns (`n`): bigint in the table, a number in JavaScript. */
const countColumn = { type: 'bigint', runtimeType: 'number' } as const;

export const ActivityCountSchema = new EntitySchema<ActivityCount>({
  class: ActivityCount,
  tableName: 'activity_counts',
  properties: {
    projectId: cascadingReference('activity_counts', 'project_id', 'Project', { primary: true }),
    source: { enum: true, items: ['event', 'email'], type: 'text', primary: true },
    hour: { type: 'Date', columnType: 'timestamptz', primary: true },
    name: { type: 'text', primary: true },
    variant: { type: 'text', default: '', primary: true },
    n: { ...countColumn },
  },
});

export const ActivityCountDailySchema = new EntitySchema<ActivityCountDaily>({
  class: ActivityCountDaily,
  tableName: 'activity_counts_daily',
  properties: {
    projectId: cascadingReference('activity_counts_daily', 'project_id', 'Project', { primary: true }),
    // No CHECK on this table's source: the fold copies it from the hourly counts.
    source: { type: 'text', primary: true },
    day: { type: 'Date', columnType: 'timestamptz', primary: true },
    name: { type: 'text', primary: true },
    variant: { type: 'text', default: '', primary: true },
    n: { ...countColumn },
  },
});

export const ActivityCountDeltaSchema = new EntitySchema<ActivityCountDelta>({
  class: ActivityCountDelta,
  tableName: 'activity_count_deltas',
  indexes: [{ name: 'activity_count_deltas_project_idx', properties: ['projectId', 'source', 'hour'] }],
  properties: {
    id: { type: 'bigint', runtimeType: 'string', primary: true, autoincrement: true },
    // No foreign key: a project's cascaded deletes write deltas while the project row is going away.
    projectId: { type: 'uuid' },
    source: { type: 'text' },
    hour: { type: 'Date', columnType: 'timestamptz' },
    name: { type: 'text' },
    variant: { type: 'text', default: '' },
    n: { ...countColumn },
  },
});
