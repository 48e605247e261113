import type { EntitySchema } from '@mikro-orm/core';
import { IdempotencyKeySchema } from '../db/idempotency-keys.entity';
import { RateLimitKeyWindowSchema } from '../db/rate-limit-key-windows.entity';
import { RateLimitWindowSchema } from '../db/rate-limit-windows.entity';
import { InboundReportSchema } from '../inbound/inbound-reports.entity';
import { accountEntities } from './accounts';
import { ActivityCountDailySchema, ActivityCountDeltaSchema, ActivityCountSchema } from './feed';
import {
  AutomationOutboxEntrySchema,
  AutomationEntrySchema,
  AutomationExecutionSchema,
  AutomationExecutionStepSchema,
  AutomationSchema,
  AutomationStepSchema,
  AutomationTransitionSchema,
  AutomationWaitSchema,
} from './automations';
import { ProcessedStripeEventSchema, ProjectBillingSchema } from './billing';
import { CampaignSchema } from './campaigns';
import { ConsentConfirmationSchema } from './consent';
import { BulkJobSchema, ContactCountDeltaSchema, ContactCountSchema, ContactImportSchema, ContactSchema } from './contacts';
import { DevMailboxMessageSchema } from './dev-mailbox';
import { DomainSchema } from './domains';
import { EmailAttachmentSchema, EmailSchema } from './emails';
import { ContactEventSchema } from './events';
import { ProjectSuspensionSchema } from './security';
import { SegmentMembershipSchema, SegmentSchema } from './segments';
import { TemplateSchema } from './templates';
import { ContactTopicSchema, TopicSchema } from './topics';
import { InboundEmailSchema } from './inbound-emails';
import { SuppressionImportSchema, SuppressionRuleSchema, SuppressionSchema } from './suppressions';
import { SnsNotificationSchema } from './webhooks-in';
import { WebhookDeliverySchema, WebhookEndpointSchema } from './webhooks-out';

/** Every table's entity schema, as createOrm registers them with MikroORM. */
export const entities: EntitySchema[] = [
  ...accountEntities,
  ActivityCountSchema,
  ActivityCountDailySchema,
  ActivityCountDeltaSchema,
  AutomationOutboxEntrySchema,
  BulkJobSchema,
  CampaignSchema,
  ConsentConfirmationSchema,
  ContactSchema,
  ContactCountSchema,
  ContactCountDeltaSchema,
  ContactEventSchema,
  ContactTopicSchema,
  ContactImportSchema,
  DevMailboxMessageSchema,
  DomainSchema,
  EmailSchema,
  EmailAttachmentSchema,
  IdempotencyKeySchema,
  InboundReportSchema,
  InboundEmailSchema,
  ProcessedStripeEventSchema,
  ProjectBillingSchema,
  ProjectSuspensionSchema,
  RateLimitKeyWindowSchema,
  RateLimitWindowSchema,
  SegmentSchema,
  SegmentMembershipSchema,
  SnsNotificationSchema,
  SuppressionSchema,
  SuppressionRuleSchema,
  SuppressionImportSchema,
  TemplateSchema,
  TopicSchema,
  WebhookDeliverySchema,
  WebhookEndpointSchema,
  AutomationSchema,
  AutomationStepSchema,
  AutomationTransitionSchema,
  AutomationEntrySchema,
  AutomationExecutionSchema,
  AutomationExecutionStepSchema,
  AutomationWaitSchema,
];
