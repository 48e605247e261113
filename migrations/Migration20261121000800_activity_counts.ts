import { Migration } from '@mikro-orm/migrations';

/**
 * Hourly counts per project of recorded events (by name) and accepted emails (by type), so analytics,
 * security rates and billing consumption read a few thousand rows instead of millions (contacts have
 * their own `contact_counts`).
 * Triggers append signed deltas (never an update of a shared row, so concurrent writers never wait on
 * each other or deadlock); a standing workflow folds them into `activity_counts`. Readers add both.
 */
export class Migration20261121000800_activity_counts extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE activity_counts (
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      source text NOT NULL CHECK (source IN ('event', 'email')),
      hour timestamptz NOT NULL,
      name text NOT NULL,
      -- email.bounce: the bounce type (permanent, transient, undetermined); email: the email type.
      variant text NOT NULL DEFAULT '',
      n bigint NOT NULL,
      PRIMARY KEY (project_id, source, hour, name, variant)
    )`);
    // The same counts by UTC day, for windows of days to months.
    this.addSql(`CREATE TABLE activity_counts_daily (
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      source text NOT NULL,
      day timestamptz NOT NULL,
      name text NOT NULL,
      variant text NOT NULL DEFAULT '',
      n bigint NOT NULL,
      PRIMARY KEY (project_id, source, day, name, variant)
    )`);
    // No foreign key: a project's cascaded deletes write deltas while the project row is going away.
    this.addSql(`CREATE TABLE activity_count_deltas (
      id bigserial PRIMARY KEY,
      project_id uuid NOT NULL,
      source text NOT NULL,
      hour timestamptz NOT NULL,
      name text NOT NULL,
      variant text NOT NULL DEFAULT '',
      n bigint NOT NULL
    )`);
    this.addSql(`CREATE INDEX activity_count_deltas_project_idx ON activity_count_deltas (project_id, source, hour)`);

    this.addSql(`CREATE FUNCTION count_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO activity_count_deltas (project_id, source, hour, name, variant, n)
            SELECT project_id, 'event', date_trunc('hour', created_at, 'UTC'), name,
                   CASE WHEN name = 'email.bounce' THEN lower(coalesce(data->>'bounceType', '')) ELSE '' END, count(*)
            FROM changed GROUP BY 1, 2, 3, 4, 5;
        ELSE
          INSERT INTO activity_count_deltas (project_id, source, hour, name, variant, n)
            SELECT project_id, 'event', date_trunc('hour', created_at, 'UTC'), name,
                   CASE WHEN name = 'email.bounce' THEN lower(coalesce(data->>'bounceType', '')) ELSE '' END, -count(*)
            FROM changed GROUP BY 1, 2, 3, 4, 5;
        END IF;
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER events_counted_insert AFTER INSERT ON events REFERENCING NEW TABLE AS changed
      FOR EACH STATEMENT EXECUTE FUNCTION count_events()`);
    this.addSql(`CREATE TRIGGER events_counted_delete AFTER DELETE ON events REFERENCING OLD TABLE AS changed
      FOR EACH STATEMENT EXECUTE FUNCTION count_events()`);

    // Usage, not history: an email stays counted in its period when its contact or project data is deleted.
    this.addSql(`CREATE FUNCTION count_emails() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO activity_count_deltas (project_id, source, hour, name, variant, n)
          SELECT project_id, 'email', date_trunc('hour', created_at, 'UTC'), 'accepted', type, count(*) FROM changed GROUP BY 1, 2, 3, 4, 5;
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER emails_counted_insert AFTER INSERT ON emails REFERENCING NEW TABLE AS changed
      FOR EACH STATEMENT EXECUTE FUNCTION count_emails()`);

    // What was recorded before the counts existed.
    this.addSql(`INSERT INTO activity_counts (project_id, source, hour, name, variant, n)
      SELECT project_id, 'event', date_trunc('hour', created_at, 'UTC'), name,
             CASE WHEN name = 'email.bounce' THEN lower(coalesce(data->>'bounceType', '')) ELSE '' END, count(*)
      FROM events GROUP BY 1, 2, 3, 4, 5`);
    this.addSql(`INSERT INTO activity_counts (project_id, source, hour, name, variant, n)
      SELECT project_id, 'email', date_trunc('hour', created_at, 'UTC'), 'accepted', type, count(*) FROM emails GROUP BY 1, 2, 3, 4, 5`);
    this.addSql(`INSERT INTO activity_counts_daily (project_id, source, day, name, variant, n)
      SELECT project_id, source, date_trunc('day', hour, 'UTC'), name, variant, sum(n) FROM activity_counts GROUP BY 1, 2, 3, 4, 5`);

    // The upcoming-work view: when a waiting execution resumes (end of its DELAY or its event timeout).
    this.addSql(`ALTER TABLE workflow_executions ADD COLUMN resume_at timestamptz`);
    this.addSql(`CREATE INDEX workflow_executions_project_waiting_idx ON workflow_executions (project_id, resume_at) WHERE status = 'WAITING'`);
    this.addSql(`CREATE INDEX campaigns_project_scheduled_idx ON campaigns (project_id, scheduled_for) WHERE status = 'SCHEDULED'`);
  }
}
