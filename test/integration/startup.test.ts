import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '../../src/db/embedded-postgres';
import { Resolver } from '../../src/dns/resolver';
import { createTestDatabase } from '../setup/db';
import { Api } from '../setup/service';

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');
const CLI = path.join(ROOT, 'dist/src/cli/index.js');
const MIGRATE = path.join(ROOT, 'dist/src/cli/migrate.js');

beforeAll(() => {
  if (!fs.existsSync(MAIN)) throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
});

/** The environment of a fresh machine: none of the service's settings. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info' };
  return { ...env, ...extra };
}

function start(args: string[], env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [MAIN, ...args], { env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return { child, output: () => out };
}

async function waitHealthy(api: Api, proc: { child: ChildProcess; output: () => string }): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null) throw new Error(`exited early:\n${proc.output()}`);
    const res = await api.get('/health').catch(() => undefined);
    if (res?.status === 200) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`never became healthy:\n${proc.output()}`);
}

function stop(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.once('exit', (code) => resolve(code));
    child.kill('SIGTERM');
  });
}

describe('configuration errors stop start-up with one line naming the variable', () => {
  test.each([
    [{ PORT: 'abc' }, /^Invalid configuration: PORT: /],
    [{ DATABASE_URL: 'mysql://x' }, /^Invalid configuration: DATABASE_URL: /],
    [{ RATE_LIMIT_PER_MINUTE: '-1' }, /^Invalid configuration: RATE_LIMIT_PER_MINUTE: /],
    [{ DNS_SERVERS: '1.1.1.1,not a host' }, /^Invalid configuration: DNS_SERVERS: /],
    [{ LOG_LEVEL: 'loud' }, /^Invalid configuration: LOG_LEVEL: /],
  ])('%o', async (env, pattern) => {
    const err = await run(process.execPath, [MAIN], { env: cleanEnv(env as Record<string, string>) }).catch((e) => e);
    expect(err.code).toBe(1);
    const lines = String(err.stderr).trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(pattern);
  });

  test('an unknown role', async () => {
    const err = await run(process.execPath, [MAIN, 'sideways'], { env: cleanEnv({}) }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(String(err.stderr)).toMatch(/Unknown role "sideways"/);
  });
});

test('starting embedded PostgreSQL leaves no SIGINT/SIGTERM handler of its own (the service shuts down in its order)', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-pg-signals-'));
  const script = `
    const { startEmbeddedPostgres } = require(${JSON.stringify(path.join(ROOT, 'dist/src/db/embedded-postgres.js'))});
    const pino = require('pino');
    const count = () => ['SIGINT', 'SIGTERM', 'SIGHUP'].map((s) => process.listenerCount(s)).join(',');
    const before = count();
    startEmbeddedPostgres({ dataDir: ${JSON.stringify(dataDir)}, log: pino({ level: 'silent' }) }).then(async (pg) => {
      console.log(JSON.stringify({ before, after: count(), beforeExit: process.listenerCount('beforeExit') }));
      await pg.stop();
    });`;
  try {
    const { stdout } = await run(process.execPath, ['-e', script], { env: cleanEnv({}) });
    const counts = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(counts.after).toBe(counts.before);
    // Its beforeExit hook stays: it stops the cluster when a process simply runs out of work.
    expect(counts.beforeExit).toBeGreaterThan(0);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

test('an embedded PostgreSQL that cannot start stops start-up with the reason PostgreSQL logged', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-pg-taken-'));
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const pgPort = (taken.address() as net.AddressInfo).port;
  try {
    const err = await run(process.execPath, [MAIN], {
      env: cleanEnv({ DATA_DIR: dataDir, PORT: String(await freePort()), HOST: '127.0.0.1', EMBEDDED_POSTGRES_PORT: String(pgPort) }),
    }).catch((e) => e);
    expect(err.code).toBe(1);
    expect(String(err.stderr)).toContain(`embedded PostgreSQL did not start on port ${pgPort}`);
    expect(String(err.stderr)).toMatch(/could not bind|Address already in use/i);
  } finally {
    taken.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

test('on a fresh machine: embedded PostgreSQL initialised once and reused; the CLI gets keys; data survives a restart', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-fresh-'));
  const port = await freePort();
  const env = { DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', TEMPORAL_ADDRESS: process.env.TEMPORAL_ADDRESS ?? '' };
  const api = new Api(`http://127.0.0.1:${port}`);
  try {
    const first = start([], env);
    await waitHealthy(api, first);
    expect(first.output()).toMatch(/initialising embedded PostgreSQL/);
    expect(fs.existsSync(path.join(dataDir, 'postgres', 'PG_VERSION'))).toBe(true);
    expect(fs.existsSync(path.join(dataDir, 'jwt-secret'))).toBe(true);

    const cli = await run(
      process.execPath,
      [CLI, 'create-project', '--email', 'ops@example.com', '--password', 'long enough pw', '--name', 'Scripted', '--url', api.baseUrl],
      { env: cleanEnv({}) },
    );
    const secretKey = /Secret key: (sk_[0-9a-f]{48})/.exec(cli.stdout)?.[1];
    const publicKey = /Public key: (pk_[0-9a-f]{48})/.exec(cli.stdout)?.[1];
    expect(secretKey).toBeDefined();
    expect(publicKey).toBeDefined();
    // Running it again for the same account logs in and creates a second project.
    const again = await run(
      process.execPath,
      [CLI, 'create-project', '--email', 'ops@example.com', '--password', 'long enough pw', '--name', 'Second', '--url', api.baseUrl],
      { env: cleanEnv({}) },
    );
    expect(again.stdout).toMatch(/Project: +Second/);

    expect((await api.post('/v1/track', { email: 'kept@example.com', event: 'signed_up' }, { key: publicKey })).status).toBe(200);
    expect((await api.get('/dev/mailbox')).status).toBe(200);
    expect(await stop(first.child)).toBe(0);

    const second = start([], env);
    await waitHealthy(api, second);
    expect(second.output()).not.toMatch(/initialising embedded PostgreSQL/);
    const list = await api.get('/contacts', { key: secretKey });
    expect(list.body.data.map((c: { email: string }) => c.email)).toEqual(['kept@example.com']);

    // A second API process on the same DATA_DIR joins the running cluster.
    const apiPort = await freePort();
    const apiOnly = start(['api'], { ...env, PORT: String(apiPort) });
    const api2 = new Api(`http://127.0.0.1:${apiPort}`);
    await waitHealthy(api2, apiOnly);
    expect(apiOnly.output()).toMatch(/already running; joining it/);
    expect((await api2.get('/contacts', { key: secretKey })).body.total).toBe(1);
    await stop(apiOnly.child);
    expect(await stop(second.child)).toBe(0);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 180_000);

test('npm run migrate applies pending migrations and is a no-op the second time', async () => {
  const url = new URL(process.env.TEST_PG_TEMPLATE_URL!);
  const name = `migrate_${Date.now()}`;
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} TEMPLATE template0`);
  await admin.end();
  url.pathname = `/${name}`;
  const env = cleanEnv({ DATABASE_URL: url.toString(), LOG_LEVEL: 'warn' });
  const first = await run(process.execPath, [MIGRATE], { env });
  expect(first.stdout).toMatch(/^Applied: Migration\d+_foundation/);
  const second = await run(process.execPath, [MIGRATE], { env });
  expect(second.stdout.trim()).toBe('Database is up to date');
});

test('npm run cli -- dns-server serves the records of a POST /domains response saved as a zone file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zone-'));
  const zone = path.join(dir, 'zone.json');
  const records = [
    { type: 'TXT', name: '_postbox-verification.cli.test', value: 'token-1' },
    { type: 'MX', name: 'bounces.cli.test', value: 'mx.postbox.test', priority: 10 },
  ];
  fs.writeFileSync(zone, JSON.stringify({ domain: 'cli.test', records }));
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, 'dns-server', '--zone', zone, '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  try {
    const deadline = Date.now() + 15_000;
    while (!out.includes('listening') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const resolver = new Resolver([`127.0.0.1:${port}`], 1000);
    expect(await resolver.txt('_postbox-verification.cli.test')).toEqual(['token-1']);
    // The return path's MX, as the domain check reads it: its exchange and priority, not an empty name.
    const mx = (await resolver.lookup('bounces.cli.test', 'MX')).answers.map((a) => `${a.priority} ${a.exchange}`);
    expect(mx).toEqual(['10 mx.postbox.test']);
    fs.writeFileSync(zone, JSON.stringify([{ records: [{ type: 'TXT', name: 'other.cli.test', value: 'v=spf1 -all' }] }]));
    let answer: string[] = [];
    while (Date.now() < deadline && answer.length === 0) {
      answer = await resolver.txt('other.cli.test').catch(() => []);
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(answer).toEqual(['v=spf1 -all']);
  } finally {
    child.kill('SIGTERM');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** Every process below `pid`, children first found by `ps`; empty once they are gone. */
async function descendants(pid: number): Promise<number[]> {
  const { stdout } = await run('ps', ['-e', '-o', 'pid=,ppid=']);
  const children = new Map<number, number[]>();
  for (const line of stdout.trim().split('\n')) {
    const [child, parent] = line.trim().split(/\s+/).map(Number);
    children.set(parent, [...(children.get(parent) ?? []), child]);
  }
  const found: number[] = [];
  const visit = (p: number) => (children.get(p) ?? []).forEach((c) => (found.push(c), visit(c)));
  visit(pid);
  return found;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to the npm process alone (as systemd, pm2 or `kill <pid>` send it): everything it started must stop. */
async function expectSigtermStopsAll(npm: ChildProcess): Promise<void> {
  const below = await descendants(npm.pid!);
  expect(below.length).toBeGreaterThan(0);
  const exited = new Promise((resolve) => npm.once('exit', resolve));
  npm.kill('SIGTERM');
  await exited;
  const deadline = Date.now() + 40_000;
  while (below.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  expect(below.filter(alive)).toEqual([]);
}

test('a SIGTERM to the process `npm start` runs stops the service and its embedded PostgreSQL', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-npm-start-'));
  const port = await freePort();
  const env = {
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    INBOUND_SMTP_PORT: '0',
    SMTP_SUBMISSION_PORT: '0',
    TEMPORAL_DEV_SERVER_PORT: '0',
    TEMPORAL_DEV_SERVER_PERSISTENCE: 'memory',
  };
  const npm = spawn('npm', ['start', '--silent'], { cwd: ROOT, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  npm.stdout!.on('data', (d) => (out += d));
  npm.stderr!.on('data', (d) => (out += d));
  try {
    await waitHealthy(new Api(`http://127.0.0.1:${port}`), { child: npm, output: () => out });
    // npm test built first, so the start found nothing to build.
    expect(out).not.toMatch(/postbox: building/);
    await expectSigtermStopsAll(npm);
    expect(await portInUse(port)).toBe(false);
  } finally {
    if (npm.exitCode === null) npm.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);

test('a SIGTERM to the process `npm run cli -- dns-server` runs stops the DNS server', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zone-'));
  const zone = path.join(dir, 'zone.json');
  fs.writeFileSync(zone, JSON.stringify({ records: [{ type: 'TXT', name: 'kill.cli.test', value: 'v' }] }));
  const port = await freePort();
  const npm = spawn('npm', ['run', '--silent', 'cli', '--', 'dns-server', '--zone', zone, '--port', String(port)], {
    cwd: ROOT,
    env: cleanEnv({}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  npm.stdout!.on('data', (d) => (out += d));
  try {
    const deadline = Date.now() + 30_000;
    while (!out.includes('listening') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(out).toContain('listening');
    await expectSigtermStopsAll(npm);
    expect(await portInUse(port)).toBe(false);
  } finally {
    if (npm.exitCode === null) npm.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}

/** Holds a port, or finds it held by another process already: either way the service finds it taken. */
async function holdPort(port: number): Promise<net.Server | undefined> {
  const server = net.createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

test('a default SMTP port found taken: the start says so on stderr, /health and the metrics report the listener down', async () => {
  const held = await Promise.all([holdPort(2525), holdPort(2587)]);
  const port = await freePort();
  const env = {
    DATABASE_URL: await createTestDatabase(),
    PORT: String(port),
    HOST: '127.0.0.1',
    METRICS_TOKEN: 'metrics-token-for-the-test',
    TEMPORAL_DEV_SERVER_PORT: '0',
    TEMPORAL_DEV_SERVER_PERSISTENCE: 'memory',
  };
  const api = new Api(`http://127.0.0.1:${port}`);
  const proc = start([], env);
  try {
    await waitHealthy(api, proc);
    expect(proc.output()).toMatch(/^postbox: WARNING: the bounce MX is not listening: port 2525 is taken/m);
    expect(proc.output()).toMatch(/^postbox: WARNING: SMTP submission is not listening: port 2587 is taken/m);
    const health = await api.get('/health');
    expect(health.status).toBe(200);
    expect(health.body.listeners).toMatchObject({ inboundMx: { status: 'down', port: 2525 }, submission: { status: 'down', port: 2587 } });
    const metrics = await api.request('GET', '/metrics', { headers: { authorization: 'Bearer metrics-token-for-the-test' } });
    expect(String(metrics.body)).toMatch(/^postbox_listener_up\{listener="inboundMx"\} 0$/m);
  } finally {
    await stop(proc.child);
    held.forEach((s) => s?.close());
  }
}, 90_000);
