/** PostgreSQL for the durable-mode tests: a database of its own per caller, in the cluster setup/global-setup.ts started. */
import crypto from 'node:crypto';
import net from 'node:net';
import pg from 'pg';

/** The variable global setup passes the cluster's admin URL in (to the `postgres` database). */
export const ADMIN_URL_VARIABLE = 'TEMPORAL_DEVSERVER_TEST_PG_URL';

/** A fresh, empty database; returns its URL (the dev server creates its own schema in it). */
export async function createTestDatabase(): Promise<string> {
  const adminUrl = process.env[ADMIN_URL_VARIABLE];
  if (!adminUrl) throw new Error(`${ADMIN_URL_VARIABLE} is not set: run the tests through jest (global setup)`);
  const name = `devserver_${process.env.JEST_WORKER_ID ?? '0'}_${crypto.randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** A free loopback port, chosen by the kernel. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
