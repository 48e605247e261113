import type { EntitySchema } from '@mikro-orm/core';
import { accountEntities } from './accounts';
import {
  AutomationOutboxEntrySchema,
  WorkflowEntrySchema,
  WorkflowExecutionSchema,
  WorkflowExecutionStepSchema,
  WorkflowSchema,
  WorkflowStepSchema,
  WorkflowTransitionSchema,
  WorkflowWaitSchema,
} from './automations';
import { CampaignSchema } from './campaigns';
import { BulkJobSchema, ContactCountDeltaSchema, ContactCountSchema, ContactImportSchema, ContactSchema } from './contacts';
import { DomainSchema } from './domains';
import { ContactEventSchema } from './events';
import { SegmentMembershipSchema, SegmentSchema } from './segments';
import { TemplateSchema } from './templates';
import { WebhookDeliverySchema, WebhookEndpointSchema } from './webhooks-out';

/** Every module's entity schemas, as createOrm registers them with MikroORM. */
export const entities: EntitySchema[] = [
  ...accountEntities,
  AutomationOutboxEntrySchema,
  CampaignSchema,
  ContactSchema,
  BulkJobSchema,
  ContactImportSchema,
  ContactCountSchema,
  ContactCountDeltaSchema,
  ContactEventSchema,
  DomainSchema,
  SegmentSchema,
  SegmentMembershipSchema,
  TemplateSchema,
  WebhookEndpointSchema,
  WebhookDeliverySchema,
  WorkflowSchema,
  WorkflowStepSchema,
  WorkflowTransitionSchema,
  WorkflowEntrySchema,
  WorkflowExecutionSchema,
  WorkflowExecutionStepSchema,
  WorkflowWaitSchema,
];
