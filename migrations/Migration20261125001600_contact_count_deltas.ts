import { Migration } from '@mikro-orm/migrations';

/**
 * Contact counts by appended deltas, like the activity counts: the statement triggers used to add to
 * one of 16 shared rows per project, and a transaction holds that row until it commits, so 32
 * concurrent /v1/send requests (each upserting its contact) waited on each other for 12 ms apiece.
 * A delta row is never shared; the activity-count fold moves deltas into `contact_counts`, and
 * readers add both.
 */
export class Migration20261125001600_contact_count_deltas extends Migration {
  override async up(): Promise<void> {
    // No foreign key: a project's cascaded deletes write deltas while the project row is going away.
    this.addSql(`CREATE TABLE contact_count_deltas (
      id bigserial PRIMARY KEY,
      project_id uuid NOT NULL,
      n bigint NOT NULL
    )`);
    this.addSql(`CREATE INDEX contact_count_deltas_project_idx ON contact_count_deltas (project_id)`);
    this.addSql(`CREATE OR REPLACE FUNCTION count_contacts() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO contact_count_deltas (project_id, n) SELECT project_id, count(*) FROM inserted GROUP BY project_id;
        ELSE
          INSERT INTO contact_count_deltas (project_id, n) SELECT project_id, -count(*) FROM deleted GROUP BY project_id;
        END IF;
        RETURN NULL;
      END $$`);
  }
}
