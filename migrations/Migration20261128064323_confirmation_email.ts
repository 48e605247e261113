import { Migration } from '@mikro-orm/migrations';

export class Migration20261128064323_confirmation_email extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "consent_confirmations" add column "email_id" uuid null;`);
    this.addSql(`create index "consent_confirmations_email_idx" on "consent_confirmations" ("email_id");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "consent_confirmations_email_idx";`);
    this.addSql(`alter table "consent_confirmations" drop column "email_id";`);
  }
}
