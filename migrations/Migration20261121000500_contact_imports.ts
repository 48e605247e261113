import { Migration } from '@mikro-orm/migrations';

/**
 * CSV imports: the uploaded file is kept in the database (so any worker can read it, in slices) until
 * the import completes, with the position reached and the outcome so far.
 */
export class Migration20261121000500_contact_imports extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE contact_imports (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      filename text,
      size_bytes integer NOT NULL DEFAULT 0,
      content bytea,
      status text NOT NULL DEFAULT 'QUEUED' CHECK (status IN ('QUEUED', 'RUNNING', 'COMPLETED', 'FAILED')),
      offset_bytes integer NOT NULL DEFAULT 0,
      next_line integer NOT NULL DEFAULT 1,
      columns text[],
      email_column integer,
      rows integer NOT NULL DEFAULT 0,
      created integer NOT NULL DEFAULT 0,
      updated integer NOT NULL DEFAULT 0,
      invalid integer NOT NULL DEFAULT 0,
      errors jsonb NOT NULL DEFAULT '[]',
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz
    )`);
    this.addSql(`CREATE INDEX contact_imports_project_idx ON contact_imports (project_id, created_at)`);
  }
}
