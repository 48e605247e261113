import { EntitySchema } from '@mikro-orm/core';
import { cascadingReference } from './entity-columns';

/**
 * A counter for one key of a project (an IP address, an email address) in one window: the requests an
 * unauthenticated form may make, where the per-project limit would let one visitor use it all.
 */
export class RateLimitKeyWindow {
  projectId!: string;
  key!: string;
  windowStart!: Date;
  count!: number;
}

export const RateLimitKeyWindowSchema = new EntitySchema<RateLimitKeyWindow>({
  class: RateLimitKeyWindow,
  tableName: 'rate_limit_key_windows',
  properties: {
    projectId: cascadingReference('rate_limit_key_windows', 'project_id', 'Project', { primary: true }),
    key: { type: 'text', primary: true },
    windowStart: { type: 'Date', columnType: 'timestamptz', primary: true },
    count: { type: 'integer' },
  },
});
