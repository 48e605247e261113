import { Migration } from '@mikro-orm/migrations';

/** Single-use, expiring tokens mailed to users (email verification, password reset); only their hash is kept. */
export class Migration20261121000600_auth_tokens extends Migration {
  override async up(): Promise<void> {
    this.addSql(`CREATE TABLE auth_tokens (
      token_hash text PRIMARY KEY,
      user_id uuid NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      purpose text NOT NULL CHECK (purpose IN ('verify_email', 'reset_password')),
      expires_at timestamptz NOT NULL,
      used_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )`);
    this.addSql(`CREATE INDEX auth_tokens_user_idx ON auth_tokens (user_id, purpose)`);
  }
}
