import { Migration } from '@mikro-orm/migrations';

/** Open and click tracking switched per template and per campaign (`{opens?, clicks?}`, null: the project's). */
export class Migration20261125001800_tracking_controls extends Migration {
  override async up(): Promise<void> {
    this.addSql(`ALTER TABLE templates ADD COLUMN tracking jsonb`);
    this.addSql(`ALTER TABLE campaigns ADD COLUMN tracking jsonb`);
  }
}
