import { Migration } from '@mikro-orm/migrations';

/**
 * A campaign is delivered in chunks of its queued rows by contact id: the queued-mail index of a
 * campaign is ordered by contact id, so a chunk (and the plan of the next ones) is a range of it,
 * however large the campaign. It replaces the one by due time, which no query asks for any more.
 */
export class Migration20261126002200_campaign_chunk_index extends Migration {
  override async up(): Promise<void> {
    this.addSql(`DROP INDEX emails_campaign_queued_idx`);
    this.addSql(`CREATE INDEX emails_campaign_queued_idx ON emails (campaign_id, contact_id) WHERE status = 'QUEUED'`);
  }
}
