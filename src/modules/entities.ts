import type { EntitySchema } from '@mikro-orm/core';
import { IdempotencyKeySchema } from '../db/idempotency-keys.entity';
import { RateLimitWindowSchema } from '../db/rate-limit-windows.entity';
import { InboundReportSchema } from '../inbound/inbound-reports.entity';
import { accountEntities } from './accounts';
import { ActivityCountDailySchema, ActivityCountDeltaSchema, ActivityCountSchema } from './activity';
import { ProcessedStripeEventSchema, ProjectBillingSchema } from './billing';
import { ContactSchema } from './contacts';
import { DevMailboxMessageSchema } from './dev-mailbox';
import { DomainSchema } from './domains';
import { EmailAttachmentSchema, EmailSchema } from './emails';
import { ProjectSuspensionSchema } from './security';
import { TemplateSchema } from './templates';
import { SnsNotificationSchema } from './webhooks-in';
import { WebhookEndpointSchema } from './webhooks-out';

/** Every module's entity schemas, as createOrm registers them with MikroORM. */
export const entities: EntitySchema[] = [
  ...accountEntities,
  ActivityCountSchema,
  ActivityCountDailySchema,
  ActivityCountDeltaSchema,
  ContactSchema,
  DevMailboxMessageSchema,
  DomainSchema,
  EmailSchema,
  EmailAttachmentSchema,
  IdempotencyKeySchema,
  InboundReportSchema,
  ProcessedStripeEventSchema,
  ProjectBillingSchema,
  ProjectSuspensionSchema,
  RateLimitWindowSchema,
  SnsNotificationSchema,
  TemplateSchema,
  WebhookEndpointSchema,
];
