import type { EntitySchema } from '@mikro-orm/core';
import { accountEntities } from './accounts';
import { CampaignSchema } from './campaigns';
import { ContactSchema } from './contacts';
import { DomainSchema } from './domains';
import { ContactEventSchema } from './events';
import { SegmentMembershipSchema, SegmentSchema } from './segments';
import { TemplateSchema } from './templates';
import { WebhookEndpointSchema } from './webhooks-out';

/** Every module's entity schemas, as createOrm registers them with MikroORM. */
export const entities: EntitySchema[] = [
  ...accountEntities,
  CampaignSchema,
  ContactSchema,
  ContactEventSchema,
  DomainSchema,
  SegmentSchema,
  SegmentMembershipSchema,
  TemplateSchema,
  WebhookEndpointSchema,
];
