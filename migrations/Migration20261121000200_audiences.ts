import { Migration } from '@mikro-orm/migrations';

/** Segments and their memberships, campaigns, and the indexes the condition engine leans on. */
export class Migration20261121000200_audiences extends Migration {
  override async up(): Promise<void> {
    // Data dates in conditions: exactly the strings the in-memory evaluator's parseDate accepts, else NULL.
    this.addSql(`CREATE FUNCTION postbox_parse_time(s text) RETURNS timestamptz LANGUAGE plpgsql IMMUTABLE STRICT AS $$
      DECLARE m text[];
      BEGIN
        s := regexp_replace(s, '^\\s+|\\s+$', '', 'g');
        m := regexp_match(s, '^(\\d{4})-(\\d{2})-(\\d{2})$');
        IF m IS NOT NULL THEN
          IF m[1]::int < 1 THEN RETURN NULL; END IF;
          RETURN (s || ' 00:00:00+00')::timestamptz;
        END IF;
        m := regexp_match(s, '^(\\d{4})-(\\d{2})-(\\d{2})[Tt ](\\d{2}):(\\d{2})(?::(\\d{2})(\\.\\d{1,6})?)?([Zz]|[+-]\\d{2}:?\\d{2})?$');
        IF m IS NULL OR m[1]::int < 1 OR m[4]::int > 23 OR m[5]::int > 59 OR coalesce(m[6], '0')::int > 59 THEN RETURN NULL; END IF;
        RETURN (m[1] || '-' || m[2] || '-' || m[3] || ' ' || m[4] || ':' || m[5] || ':' || coalesce(m[6], '00')
                || coalesce(substr(m[7], 1, 4), '') || CASE WHEN m[8] IS NULL OR upper(m[8]) = 'Z' THEN '+00' ELSE m[8] END)::timestamptz;
      EXCEPTION WHEN others THEN RETURN NULL;
      END $$`);

    // Contacts per project, for the total of an unfiltered GET /contacts without counting a million rows.
    // Statement triggers add each statement's net change to one of 16 rows per project at random, so
    // concurrent writers rarely wait on the same row.
    this.addSql(`CREATE TABLE contact_counts (
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      shard smallint NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (project_id, shard)
    )`);
    this.addSql(`CREATE FUNCTION count_contacts() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO contact_counts (project_id, shard, n)
            SELECT project_id, floor(random() * 16)::smallint, count(*) FROM inserted GROUP BY project_id
            ON CONFLICT (project_id, shard) DO UPDATE SET n = contact_counts.n + EXCLUDED.n;
        ELSE
          INSERT INTO contact_counts (project_id, shard, n)
            SELECT d.project_id, floor(random() * 16)::smallint, -count(*) FROM deleted d
            WHERE EXISTS (SELECT 1 FROM projects p WHERE p.id = d.project_id) GROUP BY d.project_id
            ON CONFLICT (project_id, shard) DO UPDATE SET n = contact_counts.n + EXCLUDED.n;
        END IF;
        RETURN NULL;
      END $$`);
    this.addSql(`CREATE TRIGGER contacts_counted_insert AFTER INSERT ON contacts REFERENCING NEW TABLE AS inserted
      FOR EACH STATEMENT EXECUTE FUNCTION count_contacts()`);
    this.addSql(`CREATE TRIGGER contacts_counted_delete AFTER DELETE ON contacts REFERENCING OLD TABLE AS deleted
      FOR EACH STATEMENT EXECUTE FUNCTION count_contacts()`);

    // data.<path> equality compiles to a containment test this index serves.
    this.addSql(`CREATE INDEX contacts_data_idx ON contacts USING gin (data jsonb_path_ops)`);
    this.addSql(`CREATE INDEX contacts_project_subscribed_idx ON contacts (project_id, subscribed)`);

    this.addSql(`CREATE TABLE segments (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      name text NOT NULL,
      description text,
      type text NOT NULL CHECK (type IN ('DYNAMIC', 'STATIC')),
      condition jsonb,
      track_membership boolean NOT NULL DEFAULT false,
      member_count integer NOT NULL DEFAULT 0,
      member_count_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX segments_project_idx ON segments (project_id, created_at)`);

    // Static members, and the current members of tracked dynamic segments (exited_at set when they leave).
    this.addSql(`CREATE TABLE segment_memberships (
      segment_id uuid NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
      contact_id uuid NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
      project_id uuid NOT NULL,
      entered_at timestamptz NOT NULL DEFAULT now(),
      exited_at timestamptz,
      PRIMARY KEY (segment_id, contact_id)
    )`);
    this.addSql(`CREATE INDEX segment_memberships_contact_idx ON segment_memberships (contact_id)`);
    this.addSql(`CREATE INDEX segment_memberships_current_idx ON segment_memberships (segment_id, contact_id) WHERE exited_at IS NULL`);

    this.addSql(`CREATE TABLE campaigns (
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
      status text NOT NULL DEFAULT 'DRAFT' CHECK (status IN ('DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED')),
      audience_type text NOT NULL CHECK (audience_type IN ('ALL', 'SEGMENT', 'FILTERED')),
      segment_id uuid REFERENCES segments(id) ON DELETE RESTRICT,
      audience_condition jsonb,
      scheduled_for timestamptz,
      total_recipients integer NOT NULL DEFAULT 0,
      sent_count integer NOT NULL DEFAULT 0,
      delivered_count integer NOT NULL DEFAULT 0,
      opened_count integer NOT NULL DEFAULT 0,
      clicked_count integer NOT NULL DEFAULT 0,
      bounced_count integer NOT NULL DEFAULT 0,
      complained_count integer NOT NULL DEFAULT 0,
      failed_count integer NOT NULL DEFAULT 0,
      -- When sending started and the audience was fixed (its recipients' emails queued).
      audience_fixed_at timestamptz,
      sent_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX campaigns_project_created_idx ON campaigns (project_id, created_at)`);
    this.addSql(`CREATE INDEX campaigns_segment_idx ON campaigns (segment_id) WHERE segment_id IS NOT NULL`);
    this.addSql(`ALTER TABLE emails ADD CONSTRAINT emails_campaign_fk FOREIGN KEY (campaign_id) REFERENCES campaigns(id) ON DELETE SET NULL`);
    // Campaign mail is delivered by its campaign's own workflow; the transactional dispatchers skip it.
    this.addSql(`DROP INDEX emails_queued_idx`);
    this.addSql(`CREATE INDEX emails_queued_idx ON emails (next_attempt_at) WHERE status = 'QUEUED' AND campaign_id IS NULL`);
    this.addSql(`CREATE INDEX emails_campaign_queued_idx ON emails (campaign_id, next_attempt_at) WHERE status = 'QUEUED'`);
    // One email per contact per campaign, whatever retries happen.
    this.addSql(`CREATE UNIQUE INDEX emails_campaign_contact_key ON emails (campaign_id, contact_id) WHERE campaign_id IS NOT NULL`);
  }
}
