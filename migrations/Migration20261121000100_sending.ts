import { Migration } from '@mikro-orm/migrations';

/** Sender domains with their DKIM keys, templates, emails and their delivery state, SNS deduplication. */
export class Migration20261121000100_sending extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE domains (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      domain text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified')),
      verification_token text NOT NULL,
      dkim_selector text NOT NULL,
      dkim_private_key text NOT NULL,
      dkim_public_key text NOT NULL,
      spf_value text NOT NULL,
      record_status jsonb NOT NULL DEFAULT '{}'::jsonb,
      verified_at timestamptz,
      last_checked_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT domains_project_domain_key UNIQUE (project_id, domain)
    )`);

    this.addSql(`CREATE TABLE templates (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name text NOT NULL,
      description text,
      subject text NOT NULL,
      body text NOT NULL,
      from_email text NOT NULL,
      from_name text,
      reply_to text,
      type text NOT NULL DEFAULT 'MARKETING' CHECK (type IN ('TRANSACTIONAL', 'MARKETING', 'HEADLESS')),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX templates_project_created_idx ON templates (project_id, created_at)`);
    // The sender domain of a template, for "is this domain in use" checks.
    this.addSql(`CREATE INDEX templates_project_from_domain_idx ON templates (project_id, (split_part(from_email, '@', 2)))`);

    // Delivery states only move up (events arrive out of order); FAILED and CANCELLED (a cancelled
    // campaign's unsent mail) are terminal and were never sent.
    this.addSql(`CREATE FUNCTION email_status_rank(status text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE status WHEN 'QUEUED' THEN 0 WHEN 'FAILED' THEN 1 WHEN 'CANCELLED' THEN 1 WHEN 'SENT' THEN 2 WHEN 'DELIVERED' THEN 3
        WHEN 'OPENED' THEN 4 WHEN 'CLICKED' THEN 5 WHEN 'BOUNCED' THEN 6 WHEN 'COMPLAINED' THEN 7 END $$`);

    this.addSql(`CREATE TABLE emails (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      contact_id uuid NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      template_id uuid REFERENCES templates(id) ON DELETE SET NULL,
      campaign_id uuid,
      type text NOT NULL CHECK (type IN ('TRANSACTIONAL', 'MARKETING', 'HEADLESS')),
      from_email text NOT NULL,
      from_name text,
      reply_to text,
      to_email text NOT NULL,
      to_name text,
      subject text NOT NULL,
      -- The rendered message; null for campaign mail, which is rendered from its campaign when sent.
      html text,
      text text,
      headers jsonb NOT NULL DEFAULT '{}'::jsonb,
      status text NOT NULL DEFAULT 'QUEUED',
      message_id text NOT NULL,
      provider_message_id text,
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      -- A dispatcher holds a queued email until then; a crashed one's claims simply expire.
      claimed_until timestamptz,
      last_error text,
      sent_at timestamptz,
      delivered_at timestamptz,
      opened_at timestamptz,
      clicked_at timestamptz,
      bounced_at timestamptz,
      complained_at timestamptz,
      failed_at timestamptz,
      open_count integer NOT NULL DEFAULT 0,
      click_count integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT emails_status_check CHECK (email_status_rank(status) IS NOT NULL)
    )`);
    this.addSql(`CREATE INDEX emails_project_created_idx ON emails (project_id, created_at)`);
    this.addSql(`CREATE INDEX emails_contact_idx ON emails (contact_id)`);
    this.addSql(`CREATE INDEX emails_campaign_idx ON emails (campaign_id) WHERE campaign_id IS NOT NULL`);
    this.addSql(`CREATE INDEX emails_provider_message_idx ON emails (provider_message_id) WHERE provider_message_id IS NOT NULL`);
    this.addSql(`CREATE INDEX emails_message_id_idx ON emails (message_id)`);
    this.addSql(`CREATE INDEX emails_queued_idx ON emails (next_attempt_at) WHERE status = 'QUEUED'`);

    this.addSql(`CREATE TABLE email_attachments (
      id uuid PRIMARY KEY,
      email_id uuid NOT NULL REFERENCES emails(id) ON DELETE CASCADE,
      position integer NOT NULL,
      filename text NOT NULL,
      content_type text NOT NULL,
      content_id text,
      disposition text NOT NULL CHECK (disposition IN ('attachment', 'inline')),
      content bytea NOT NULL
    )`);
    this.addSql(`CREATE INDEX email_attachments_email_idx ON email_attachments (email_id, position)`);

    // SNS retries a notification until answered; its MessageId makes processing exactly-once.
    this.addSql(`CREATE TABLE sns_notifications (
      message_id text PRIMARY KEY,
      received_at timestamptz NOT NULL DEFAULT now()
    )`);
  }
}
