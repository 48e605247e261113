import { Migration } from '@mikro-orm/migrations';

/**
 * The suppression list, its rules and its CSV imports; SUPPRESSED, the status of an email never sent because its address
 * is suppressed; and the contacts a bounce or a complaint unsubscribed before the list existed, listed.
 */
export class Migration20261128061700_suppressions extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "suppressions" ("project_id" uuid not null, "email" text not null, "reason" text check ("reason" in ('BOUNCE', 'COMPLAINT', 'MANUAL')) not null, "email_id" uuid null, "detail" text null, "created_at" timestamptz not null default now(), constraint "suppressions_pkey" primary key ("project_id", "email"));`,
    );
    this.addSql(`create index "suppressions_project_created_idx" on "suppressions" ("project_id", "created_at");`);

    this.addSql(
      `create table "suppression_rules" ("id" uuid not null, "project_id" uuid not null, "name" text not null, "kind" text check ("kind" in ('ADDRESS', 'DOMAIN', 'PREFIX', 'SUFFIX', 'WILDCARD')) not null, "pattern" text not null, "like_pattern" text not null, "enabled" boolean not null default true, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "suppression_rules_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "suppression_rules_project_idx" on "suppression_rules" ("project_id", "created_at");`);

    this.addSql(
      `create table "suppression_imports" ("id" uuid not null, "project_id" uuid not null, "filename" text null, "size_bytes" int not null default 0, "content" bytea null, "status" text check ("status" in ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED')) not null default 'QUEUED', "offset_bytes" int not null default 0, "next_line" int not null default 1, "email_column" int null, "rows" int not null default 0, "added" int not null default 0, "already_listed" int not null default 0, "invalid" int not null default 0, "errors" jsonb not null default '[]'::jsonb, "error" text null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), "completed_at" timestamptz null, constraint "suppression_imports_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "suppression_imports_project_idx" on "suppression_imports" ("project_id", "created_at");`);
    this.addSql(
      `alter table "suppression_imports" add constraint "suppression_imports_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );

    this.addSql(
      `alter table "suppressions" add constraint "suppressions_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );
    this.addSql(
      `alter table "suppression_rules" add constraint "suppression_rules_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );

    // SUPPRESSED ranks with FAILED and CANCELLED: never sent.
    this.addSql(`CREATE OR REPLACE FUNCTION email_status_rank(status text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE status WHEN 'QUEUED' THEN 0 WHEN 'FAILED' THEN 1 WHEN 'CANCELLED' THEN 1 WHEN 'SUPPRESSED' THEN 1 WHEN 'SENT' THEN 2
        WHEN 'DELIVERED' THEN 3 WHEN 'OPENED' THEN 4 WHEN 'CLICKED' THEN 5 WHEN 'BOUNCED' THEN 6 WHEN 'COMPLAINED' THEN 7 END $$`);

    // Until now a hard bounce, the soft-bounce limit or a complaint only unsubscribed the contact, with a
    // contact.unsubscribed event saying so (data.reason, data.emailId). A contact still unsubscribed whose
    // latest change of its global subscription is that event is listed for it.
    this.addSql(`INSERT INTO suppressions (project_id, email, reason, email_id, detail, created_at)
      SELECT c.project_id, lower(c.email),
             CASE last.data->>'reason' WHEN 'complaint' THEN 'COMPLAINT' ELSE 'BOUNCE' END,
             CASE WHEN last.data->>'emailId' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN (last.data->>'emailId')::uuid END,
             CASE last.data->>'reason' WHEN 'soft-bounce' THEN 'soft-bounce limit reached (listed from the contact''s unsubscription)'
                                       ELSE 'listed from the contact''s unsubscription' END,
             last.created_at
      FROM contacts c
      CROSS JOIN LATERAL (
        SELECT e.name, e.data, e.created_at FROM events e
        WHERE e.project_id = c.project_id AND e.contact_id = c.id AND e.name IN ('contact.subscribed', 'contact.unsubscribed') AND NOT (e.data ? 'topicId')
        ORDER BY e.created_at DESC, e.id DESC LIMIT 1
      ) last
      WHERE NOT c.subscribed AND last.name = 'contact.unsubscribed' AND last.data->>'reason' IN ('bounce', 'soft-bounce', 'complaint')
      ON CONFLICT (project_id, email) DO NOTHING`);
  }

  override async down(): Promise<void> {
    this.addSql(`CREATE OR REPLACE FUNCTION email_status_rank(status text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
      SELECT CASE status WHEN 'QUEUED' THEN 0 WHEN 'FAILED' THEN 1 WHEN 'CANCELLED' THEN 1 WHEN 'SENT' THEN 2 WHEN 'DELIVERED' THEN 3
        WHEN 'OPENED' THEN 4 WHEN 'CLICKED' THEN 5 WHEN 'BOUNCED' THEN 6 WHEN 'COMPLAINED' THEN 7 END $$`);
    this.addSql(`drop table if exists "suppression_imports" cascade;`);
    this.addSql(`drop table if exists "suppression_rules" cascade;`);
    this.addSql(`drop table if exists "suppressions" cascade;`);
  }
}
