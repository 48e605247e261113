import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';

/** A project's billing: its caps, and the Stripe customer and subscription that pay for it. */
export class ProjectBilling {
  [OptionalProps]?: 'emailLimit' | 'contactLimit' | 'stripeCustomerId' | 'stripeSubscriptionId' | 'subscriptionStatus' | 'stripeEventAt' | 'updatedAt';
  projectId!: string;
  /** Emails accepted per calendar month (UTC); null is no cap. Bigint, read as text. */
  emailLimit: string | null = null;
  /** Contacts the project may hold while it sends; null is no cap. Bigint, read as text. */
  contactLimit: string | null = null;
  stripeCustomerId: string | null = null;
  stripeSubscriptionId: string | null = null;
  subscriptionStatus: string | null = null;
  /** When the last applied Stripe event was created: Stripe does not deliver in order. */
  stripeEventAt: Date | null = null;
  updatedAt!: Date;
}

/** A Stripe event already processed: its id makes a redelivered webhook change nothing. */
export class ProcessedStripeEvent {
  [OptionalProps]?: 'receivedAt';
  id!: string;
  type!: string;
  receivedAt!: Date;
}

export const ProjectBillingSchema = new EntitySchema<ProjectBilling>({
  class: ProjectBilling,
  tableName: 'project_billing',
  checks: [
    { name: 'project_billing_email_limit_check', expression: 'email_limit >= 0' },
    { name: 'project_billing_contact_limit_check', expression: 'contact_limit >= 0' },
  ],
  properties: {
    projectId: cascadingReference('project_billing', 'project_id', 'Project', { primary: true }),
    emailLimit: { type: 'bigint', runtimeType: 'string', nullable: true },
    contactLimit: { type: 'bigint', runtimeType: 'string', nullable: true },
    stripeCustomerId: { type: 'text', nullable: true, unique: 'project_billing_stripe_customer_id_key' },
    stripeSubscriptionId: { type: 'text', nullable: true },
    subscriptionStatus: { type: 'text', nullable: true },
    stripeEventAt: { ...optionalTimestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const ProcessedStripeEventSchema = new EntitySchema<ProcessedStripeEvent>({
  class: ProcessedStripeEvent,
  tableName: 'stripe_events',
  properties: {
    id: { type: 'text', primary: true },
    type: { type: 'text' },
    receivedAt: { ...timestampColumn },
  },
});
