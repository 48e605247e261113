import { Migration } from '@mikro-orm/migrations';

/**
 * Who claimed a queued email (the claiming activity's workflow id), so a retried activity takes back
 * its own dead attempt's claims at once instead of waiting for them to expire.
 */
export class Migration20261124001500_email_claim_owner extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE emails ADD COLUMN claimed_by text`);
  }
}
