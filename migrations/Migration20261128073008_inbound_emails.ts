import { Migration } from '@mikro-orm/migrations';

/** Mail received at sender domains' inbound hosts (inbound.<domain>), one row per project and message. */
export class Migration20261128073008_inbound_emails extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "inbound_emails" ("id" uuid not null, "project_id" uuid not null, "message_key" text not null, "from_address" text not null, "to_addresses" jsonb not null, "cc_addresses" jsonb not null, "subject" text not null, "text" text null, "html" text null, "headers" jsonb not null, "attachments" jsonb not null, "email_id" uuid null, "contact_id" uuid not null, "envelope_from" text null, "envelope_to" text not null, "size_bytes" int not null, "raw" bytea not null, "received_at" timestamptz not null default now(), constraint "inbound_emails_pkey" primary key ("id"));`,
    );
    this.addSql(`create index "inbound_emails_project_received_idx" on "inbound_emails" ("project_id", "received_at", "id");`);
    this.addSql(`create index "inbound_emails_received_idx" on "inbound_emails" ("received_at");`);
    this.addSql(`alter table "inbound_emails" add constraint "inbound_emails_project_key_idx" unique ("project_id", "message_key");`);

    this.addSql(
      `alter table "inbound_emails" add constraint "inbound_emails_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );
    this.addSql(
      `alter table "inbound_emails" add constraint "inbound_emails_contact_id_fkey" foreign key ("contact_id") references "contacts" ("id") on update no action on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`drop table if exists "inbound_emails" cascade;`);
  }
}
