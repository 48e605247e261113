import { Migration } from '@mikro-orm/migrations';

/** Bulk subscribe, unsubscribe and delete jobs: the contacts they cover and their pollable progress. */
export class Migration20261121000400_bulk_jobs extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE bulk_jobs (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      kind text NOT NULL CHECK (kind IN ('subscribe', 'unsubscribe', 'delete')),
      status text NOT NULL DEFAULT 'QUEUED' CHECK (status IN ('QUEUED', 'RUNNING', 'COMPLETED')),
      contact_ids uuid[] NOT NULL,
      processed integer NOT NULL DEFAULT 0,
      changed integer NOT NULL DEFAULT 0,
      unchanged integer NOT NULL DEFAULT 0,
      not_found uuid[] NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz
    )`);
    this.addSql(`CREATE INDEX bulk_jobs_project_idx ON bulk_jobs (project_id, created_at)`);
  }
}
