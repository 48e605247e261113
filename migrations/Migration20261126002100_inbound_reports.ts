import { Migration } from '@mikro-orm/migrations';

/**
 * Reports the inbound MX took (bounces, delays, complaints, auto-replies), one row per email a report
 * is about: what it said, for operators and the delivery log, and the key that makes a report sent
 * again (an MTA retrying after a lost 250) change nothing twice.
 */
export class Migration20261126002100_inbound_reports extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE inbound_reports (
      id uuid PRIMARY KEY,
      report_key text NOT NULL,
      email_id uuid REFERENCES emails(id) ON DELETE CASCADE,
      project_id uuid REFERENCES projects(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('bounce', 'delay', 'complaint', 'auto-reply', 'unknown')),
      envelope_from text,
      envelope_to text NOT NULL,
      detail jsonb NOT NULL DEFAULT '{}'::jsonb,
      received_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE UNIQUE INDEX inbound_reports_key_email_idx ON inbound_reports (report_key, email_id)`);
    this.addSql(`CREATE INDEX inbound_reports_email_idx ON inbound_reports (email_id)`);
    this.addSql(`CREATE INDEX inbound_reports_received_idx ON inbound_reports (received_at)`);
  }
}
