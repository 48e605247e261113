import { Migration } from '@mikro-orm/migrations';

export class Migration20261128075100_test_sends_without_contact extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "emails" alter column "contact_id" drop not null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "emails" alter column "contact_id" set not null;`);
  }
}
