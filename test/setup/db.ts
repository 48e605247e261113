import crypto from 'node:crypto';
import pg from 'pg';

/** A fresh database cloned from the migrated template; returns its URL. */
export async function createTestDatabase(): Promise<string> {
  const templateUrl = process.env.TEST_PG_TEMPLATE_URL;
  if (!templateUrl) throw new Error('TEST_PG_TEMPLATE_URL is not set: run the tests through jest (global setup)');
  const url = new URL(templateUrl);
  const template = url.pathname.slice(1);
  const name = `test_${process.env.JEST_WORKER_ID ?? '0'}_${crypto.randomBytes(4).toString('hex')}`;
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`);
  } finally {
    await admin.end();
  }
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs one query against a test database (for asserting what was, or was not, written). */
export async function dbQuery<T = any>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}
