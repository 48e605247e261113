import { Migration } from '@mikro-orm/migrations';

/** Suspensions for bounce and complaint rates; billing caps, the Stripe customer, Stripe event deduplication. */
export class Migration20261121000900_security_and_billing extends Migration {
  override async up(): Promise<void> {
    // Rates are judged from this time on (and at most the window back): set when a suspension is lifted.
    this.addSql(`ALTER TABLE projects ADD COLUMN security_reviewed_at timestamptz`);
    this.addSql(`CREATE TABLE project_suspensions (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      metric text NOT NULL CHECK (metric IN ('bounce', 'complaint')),
      rate double precision NOT NULL,
      threshold double precision NOT NULL,
      sent bigint NOT NULL,
      bounced bigint NOT NULL,
      complained bigint NOT NULL,
      window_start timestamptz NOT NULL,
      reason text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      lifted_at timestamptz,
      lifted_by text
    )`);
    this.addSql(`CREATE INDEX project_suspensions_project_idx ON project_suspensions (project_id, created_at)`);

    this.addSql(`CREATE TABLE project_billing (
      project_id uuid PRIMARY KEY REFERENCES projects(id) ON DELETE CASCADE,
      -- Caps per calendar month (UTC) and on the contact count; null is no cap.
      email_limit bigint CHECK (email_limit >= 0),
      contact_limit bigint CHECK (contact_limit >= 0),
      stripe_customer_id text UNIQUE,
      stripe_subscription_id text,
      subscription_status text,
      -- When the last applied Stripe event was created: Stripe does not deliver in order.
      stripe_event_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    // Stripe retries a webhook until answered; its event id makes processing exactly-once.
    this.addSql(`CREATE TABLE stripe_events (
      id text PRIMARY KEY,
      type text NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now()
    )`);
  }
}
