import { Migration } from '@mikro-orm/migrations';

/** Invitations to a project for addresses that have no verified account yet. */
export class Migration20261121000700_project_invites extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE project_invites (
      id uuid PRIMARY KEY,
      project_id uuid NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
      email text NOT NULL,
      role text NOT NULL CHECK (role IN ('OWNER', 'ADMIN', 'MEMBER')),
      invited_by uuid REFERENCES users(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (project_id, email)
    )`);
    this.addSql(`CREATE INDEX project_invites_email_idx ON project_invites (email)`);
  }
}
