import { Migration } from '@mikro-orm/migrations';

/** A/B tests (variants, winner, phase; each email's variant) and local-time campaigns (each email's time zone). */
export class Migration20261128065418_ab_tests_and_local_time extends Migration {
  override async up(): Promise<void> {
    this.addSql(`alter table "campaigns" drop constraint if exists "campaigns_status_check";`);

    this.addSql(
      `alter table "campaigns" add column "ab_test" jsonb null, add column "ab_winner_variant_id" text null, add column "ab_phase" text null, add column "local_time" jsonb null;`,
    );
    this.addSql(
      `alter table "campaigns" add constraint "campaigns_status_check" check("status" in ('DRAFT', 'SCHEDULED', 'SENDING', 'TESTING', 'SENT', 'CANCELLED'));`,
    );

    this.addSql(`alter table "emails" add column "variant_id" text null, add column "time_zone" text null;`);
  }

  override async down(): Promise<void> {
    this.addSql(`alter table "campaigns" drop constraint if exists "campaigns_status_check";`);

    this.addSql(`alter table "campaigns" drop column "ab_test", drop column "ab_winner_variant_id", drop column "ab_phase", drop column "local_time";`);

    this.addSql(`alter table "campaigns" add constraint "campaigns_status_check" check("status" in ('DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED'));`);

    this.addSql(`alter table "emails" drop column "variant_id", drop column "time_zone";`);
  }
}
