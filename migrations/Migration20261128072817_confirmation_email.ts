import { Migration } from '@mikro-orm/migrations';

export class Migration20261128072817_confirmation_email extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "consent_confirmations" add column "email_id" uuid null;`);
    this.addSql(`create index "consent_confirmations_email_idx" on "consent_confirmations" ("email_id");`);
    this.addSql(`create index "consent_confirmations_project_mailed_idx" on "consent_confirmations" ("project_id", "mailed_at");`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "consent_confirmations_email_idx";`);
    this.addSql(`drop index "consent_confirmations_project_mailed_idx";`);
    this.addSql(`alter table "consent_confirmations" drop column "email_id";`);
  }
}
