import { Migration } from '@mikro-orm/migrations';

/** A campaign's topic, and the topics a bulk job or a CSV import subscribes its contacts to. */
export class Migration20261126195153_topic_targeting extends Migration {
  override async up(): Promise<void> {
    this.addSql(
      `alter table "contact_imports" add column "topic_ids" uuid[] not null default '{}', add column "double_opt_in" boolean not null default false;`,
    );

    this.addSql(`alter table "bulk_jobs" add column "topic_id" uuid null;`);

    this.addSql(`alter table "campaigns" add column "topic_id" uuid null;`);
    this.addSql(
      `alter table "campaigns" add constraint "campaigns_topic_id_fkey" foreign key ("topic_id") references "topics" ("id") on update no action on delete set null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "campaigns" drop constraint "campaigns_topic_id_fkey";`);

    this.addSql(`alter table "bulk_jobs" drop column "topic_id";`);

    this.addSql(`alter table "campaigns" drop column "topic_id";`);

    this.addSql(`alter table "contact_imports" drop column "topic_ids", drop column "double_opt_in";`);
  }
}
