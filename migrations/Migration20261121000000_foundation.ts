import { Migration } from '@mikro-orm/migrations';

/** Accounts, projects and keys, contacts, events, idempotency keys, rate-limit windows, dev mailbox. */
export class Migration20261121000000_foundation extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE EXTENSION IF NOT EXISTS pg_trgm`);

    this.addSql(`CREATE TABLE users (
      id uuid PRIMARY KEY,
      email text NOT NULL UNIQUE,
      password_hash text NOT NULL,
      email_verified boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);

    this.addSql(`CREATE TABLE projects (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      public_key text NOT NULL UNIQUE,
      secret_key text NOT NULL UNIQUE,
      disabled boolean NOT NULL DEFAULT false,
      disabled_reason text,
      settings jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);

    // API processes cache key lookups; any change of keys or status, by the service or by hand, tells them.
    this.addSql(`CREATE FUNCTION notify_project_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('postbox_project_changed', OLD.id::text);
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER projects_changed AFTER UPDATE OF public_key, secret_key, disabled OR DELETE ON projects
      FOR EACH ROW EXECUTE FUNCTION notify_project_changed()`);

    this.addSql(`CREATE TABLE project_members (
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      role text NOT NULL CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER')),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (project_id, user_id)
    )`);
    this.addSql(`CREATE INDEX project_members_user_idx ON project_members (user_id)`);

    this.addSql(`CREATE TABLE contacts (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      email text NOT NULL,
      subscribed boolean NOT NULL,
      snoozed_until timestamptz,
      data jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT contacts_project_email_key UNIQUE (project_id, email)
    )`);
    // Cursor pages in either sort order walk these indexes; email order is served by the unique key.
    this.addSql(`CREATE INDEX contacts_project_created_idx ON contacts (project_id, created_at, id)`);
    this.addSql(`CREATE INDEX contacts_email_trgm_idx ON contacts USING gin (email gin_trgm_ops)`);

    this.addSql(`CREATE TABLE events (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      contact_id uuid NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      name text NOT NULL,
      data jsonb NOT NULL DEFAULT '{}'::jsonb,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX events_project_created_idx ON events (project_id, created_at, id)`);
    this.addSql(`CREATE INDEX events_project_name_created_idx ON events (project_id, name, created_at)`);
    this.addSql(`CREATE INDEX events_project_contact_name_idx ON events (project_id, contact_id, name, created_at)`);
    this.addSql(`CREATE INDEX events_contact_idx ON events (contact_id)`);

    this.addSql(`CREATE TABLE idempotency_keys (
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      key text NOT NULL,
      request text NOT NULL,
      status_code integer,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (project_id, key)
    )`);
    this.addSql(`CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at)`);

    this.addSql(`CREATE TABLE rate_limit_windows (
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      window_start timestamptz NOT NULL,
      count integer NOT NULL,
      PRIMARY KEY (project_id, window_start)
    )`);

    this.addSql(`CREATE TABLE dev_mailbox_messages (
      id uuid PRIMARY KEY,
      received_at timestamptz NOT NULL DEFAULT now(),
      envelope_from text,
      envelope_to text[] NOT NULL,
      subject text,
      message_id text,
      raw bytea NOT NULL
    )`);
    this.addSql(`CREATE INDEX dev_mailbox_received_idx ON dev_mailbox_messages (received_at DESC)`);
  }
}
