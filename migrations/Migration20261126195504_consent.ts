import { Migration } from '@mikro-orm/migrations';

/** Double opt-in confirmations, kept as the consent record; per-key rate-limit windows for the subscribe form. */
export class Migration20261126195504_consent extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "consent_confirmations" ("id" uuid not null, "project_id" uuid not null, "contact_id" uuid not null, "topic_ids" jsonb not null default '[]', "subscribe_all" boolean not null, "source" text not null, "requested_at" timestamptz not null default now(), "requested_ip" text null, "requested_user_agent" text null, "mailed_at" timestamptz null, "expires_at" timestamptz not null, "confirmed_at" timestamptz null, "confirmed_ip" text null, "confirmed_user_agent" text null, constraint "consent_confirmations_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "consent_confirmations_contact_idx" on "consent_confirmations" ("contact_id", "requested_at");`);

    this.addSql(
      `create table "rate_limit_key_windows" ("project_id" uuid not null, "key" text not null, "window_start" timestamptz not null, "count" int not null, constraint "rate_limit_key_windows_pkey" primary key ("project_id", "key", "window_start"));`,
    );

    this.addSql(
      `alter table "consent_confirmations" add constraint "consent_confirmations_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );
    this.addSql(
      `alter table "consent_confirmations" add constraint "consent_confirmations_contact_id_fkey" foreign key ("contact_id") references "contacts" ("id") on update no action on delete cascade;`,
    );

    this.addSql(
      `alter table "rate_limit_key_windows" add constraint "rate_limit_key_windows_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "consent_confirmations" cascade;`);

    this.addSql(`drop table if exists "rate_limit_key_windows" cascade;`);
  }
}
