import { EntitySchema } from '@mikro-orm/core';
import { cascadingReference } from './entity-columns';

/** A project's shared counter for one one-minute rate-limit window: the requests its processes reserved in it. */
export class RateLimitWindow {
  projectId!: string;
  windowStart!: Date;
  count!: number;
}

export const RateLimitWindowSchema = new EntitySchema<RateLimitWindow>({
  class: RateLimitWindow,
  tableName: 'rate_limit_windows',
  properties: {
    projectId: cascadingReference('rate_limit_windows', 'project_id', 'Project', { primary: true }),
    windowStart: { type: 'Date', columnType: 'timestamptz', primary: true },
    count: { type: 'integer' },
  },
});
