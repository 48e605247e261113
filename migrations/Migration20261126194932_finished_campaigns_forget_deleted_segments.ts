import { Migration } from '@mikro-orm/migrations';

export class Migration20261126194932_finished_campaigns_forget_deleted_segments extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "campaigns" drop constraint "campaigns_segment_id_fkey";`);

    this.addSql(
      `alter table "campaigns" add constraint "campaigns_segment_id_fkey" foreign key ("segment_id") references "segments" ("id") on update no action on delete set null;`,
    );
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "campaigns" drop constraint "campaigns_segment_id_fkey";`);

    this.addSql(
      `alter table "campaigns" add constraint "campaigns_segment_id_fkey" foreign key ("segment_id") references "segments" ("id") on update no action on delete restrict;`,
    );
  }
}
