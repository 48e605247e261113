import { Migration } from '@mikro-orm/migrations';

/**
 * The answer a key's request got, kept with the key: an SMTP client that sends the same message again
 * (same Message-ID) is given the email ids of the first acceptance, not a refusal.
 */
export class Migration20261125002000_idempotent_responses extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE idempotency_keys ADD COLUMN response jsonb`);
  }
}
