import { Migration } from '@mikro-orm/migrations';

/** Topics a contact can join or leave, and each contact's own choice per topic (no row: the topic's default). */
export class Migration20261126194104_topics extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `create table "topics" ("id" uuid not null, "project_id" uuid not null, "name" text not null, "description" text null, "default_subscription" text check ("default_subscription" in ('opt_in', 'opt_out')) not null default 'opt_in', "public" boolean not null default true, "double_opt_in" boolean null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), constraint "topics_pkey" primary key ("id"));`,
    );
    this.addSql(`alter table "topics" add constraint "topics_project_id_name_unique" unique ("project_id", "name");`);

    this.addSql(
      `create table "contact_topics" ("contact_id" uuid not null, "topic_id" uuid not null, "project_id" uuid not null, "state" text check ("state" in ('subscribed', 'unsubscribed', 'pending')) not null, "updated_at" timestamptz not null default now(), constraint "contact_topics_pkey" primary key ("contact_id", "topic_id"));`,
    );
    this.addSql(`create index "contact_topics_topic_id_state_index" on "contact_topics" ("topic_id", "state");`);

    this.addSql(
      `alter table "topics" add constraint "topics_project_id_fkey" foreign key ("project_id") references "projects" ("id") on update no action on delete cascade;`,
    );

    this.addSql(
      `alter table "contact_topics" add constraint "contact_topics_contact_id_fkey" foreign key ("contact_id") references "contacts" ("id") on update no action on delete cascade;`,
    );
    this.addSql(
      `alter table "contact_topics" add constraint "contact_topics_topic_id_fkey" foreign key ("topic_id") references "topics" ("id") on update no action on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "contact_topics" drop constraint "contact_topics_topic_id_fkey";`);

    this.addSql(`drop table if exists "topics" cascade;`);

    this.addSql(`drop table if exists "contact_topics" cascade;`);
  }
}
