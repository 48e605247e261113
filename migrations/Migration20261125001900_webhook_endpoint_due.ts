import { Migration } from '@mikro-orm/migrations';

/**
 * Claims walk the endpoints and take each one's earliest due deliveries through this index, so their
 * cost follows the endpoints and the rows claimed, not the backlog a dead endpoint piles up.
 */
export class Migration20261125001900_webhook_endpoint_due extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE INDEX webhook_deliveries_endpoint_due_idx ON webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'PENDING'`);
  }
}
