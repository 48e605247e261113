/**
 * Hostile clients on every port: the service runs as its own process under `ulimit -n 4096`, with its
 * default connection limits, and is flooded with idle connections from many loopback addresses (as the
 * outside audit did, 20,000 to SMTP submission took the process down). It must keep answering /health,
 * run workflows, and be whole afterwards.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../src/db/embedded-postgres';
import { createTestDatabase } from '../setup/db';
import { Api } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { until } from '../setup/until';

const ROOT = path.resolve(__dirname, '../..');
const MAIN = path.join(ROOT, 'dist/src/main.js');
const FLOOD = path.join(ROOT, 'dist/test/setup/flood.js');
const FILE_LIMIT = 4096;
/**
 * The defaults of HTTP_MAX_CONNECTIONS, SMTP_SUBMISSION_MAX_CONNECTIONS, INBOUND_MAX_CONNECTIONS,
 * TEMPORAL_DEV_SERVER_MAX_CONNECTIONS (the dev server's gRPC port) and the fixed Web UI and metrics limits.
 */
const LIMITS = { http: 1024, submission: 256, inbound: 256, temporalGrpc: 256, temporalUi: 128, metrics: 32 };
/** The capture SMTP server's fixed limit: the service's own mail goes through it, so it is flooded on its own. */
const DEV_SMTP_LIMIT = 256;

let service: ChildProcess;
let output = '';
const ports = { api: 0, submission: 0, inbound: 0, ui: 0, metrics: 0, temporal: 0, devSmtp: 0 };
let dataDir: string;

beforeAll(async () => {
  if (!fs.existsSync(MAIN) || !fs.existsSync(FLOOD)) throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
  for (const k of Object.keys(ports) as Array<keyof typeof ports>) ports[k] = await freePort();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-flood-'));
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DATABASE_URL: await createTestDatabase(),
    DATA_DIR: dataDir,
    PORT: String(ports.api),
    PUBLIC_URL: `http://127.0.0.1:${ports.api}`,
    SMTP_SUBMISSION_PORT: String(ports.submission),
    INBOUND_SMTP_PORT: String(ports.inbound),
    METRICS_PORT: String(ports.metrics),
    TEMPORAL_DEV_SERVER_PORT: String(ports.temporal),
    TEMPORAL_DEV_SERVER_PERSISTENCE: 'memory',
    TEMPORAL_UI_PORT: String(ports.ui),
    DEV_SMTP_PORT: String(ports.devSmtp),
    LOG_LEVEL: 'warn',
  };
  service = spawn('prlimit', [`--nofile=${FILE_LIMIT}:${FILE_LIMIT}`, process.execPath, MAIN, 'all'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  service.stdout!.on('data', (d) => (output += d));
  service.stderr!.on('data', (d) => (output += d));
  const api = new Api(`http://127.0.0.1:${ports.api}`);
  await until(
    async () => {
      if (service.exitCode !== null) throw new Error(`the service exited:\n${output}`);
      return (await api.get('/health').catch(() => undefined))?.status === 200 ? true : undefined;
    },
    90_000,
    'the service to be healthy',
  );
}, 120_000);

afterAll(async () => {
  if (service && service.exitCode === null) {
    const exited = new Promise((r) => service.once('exit', r));
    service.kill('SIGTERM');
    await exited;
  }
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** Starts a flood; resolves with it once every attempt has ended (its connections still held). */
async function flood(targets: Array<{ port: number; count: number }>): Promise<{ stop(): void; result: Record<string, number> }> {
  const child = spawn(process.execPath, [FLOOD, JSON.stringify(targets), '40'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const result = await new Promise<Record<string, number>>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]));
    });
    child.once('exit', (code) => reject(new Error(`the flood exited early (${code})`)));
  });
  return { stop: () => child.stdin!.end(), result };
}

/** One request over `agent`: its status and JSON body (status 0 when the connection failed). */
function call(agent: http.Agent, method: string, p: string, body?: unknown): Promise<{ status: number; body: any }> {
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port: ports.api, method, path: p, agent, timeout: 5000, headers: { 'content-type': 'application/json' } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on('error', () => resolve({ status: 0, body: undefined }));
    req.on('timeout', () => req.destroy());
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** GET /health every 100 ms on one keep-alive connection opened before the flood; collects every status. */
function pollHealth(): { agent: http.Agent; statuses: number[]; stop(): Promise<void> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const statuses: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      statuses.push((await call(agent, 'GET', '/health')).status);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    agent,
    statuses,
    stop: async () => {
      running = false;
      await loop;
      agent.destroy();
    },
  };
}

const openDescriptors = () => fs.readdirSync(`/proc/${service.pid}/fd`).length;
/**
 * The service's open sockets, counted on its side: the flood's own count of connections it holds also
 * takes in those still waiting in the kernel's accept queue, which the process has not taken (and holds no
 * descriptor for) while it is busy.
 */
const openSockets = () =>
  fs.readdirSync(`/proc/${service.pid}/fd`).filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/${service.pid}/fd/${fd}`).startsWith('socket:');
    } catch {
      return false; // closed between the listing and the read
    }
  }).length;
/** Sockets the service may open of its own during a flood: database and Temporal connections, DNS, mail. */
const OWN_SOCKETS = 64;
/** Each server counts the connection its gate is refusing, so a listener holds at most its limit and one. */
/** A signup over a new connection, and its verification mail (sent by a workflow) in the dev mailbox. */
async function signupMailArrives(api: Api, prefix: string): Promise<void> {
  const signup = await api.post('/auth/signup', { email: `${prefix}-${Date.now()}@example.com`, password: 'correct horse battery' });
  expect(signup.status).toBe(201);
  await until(
    async () => ((await api.get(`/dev/mailbox?to=${encodeURIComponent(signup.body.email)}`)).body.data?.length ? true : undefined),
    30_000,
    `the verification mail of ${signup.body.email}`,
  );
}

const heldAtMost = (limits: number[]) => limits.reduce((a, b) => a + b + 1, 0);

test('the service runs under a low file limit with room to spare', () => {
  // prlimit execs node, so the service's own pid carries the limit.
  expect(fs.readFileSync(`/proc/${service.pid}/limits`, 'utf8')).toMatch(new RegExp(`Max open files\\s+${FILE_LIMIT}\\s+${FILE_LIMIT}`));
  expect(Object.values(LIMITS).reduce((a, b) => a + b, 0)).toBeLessThan(FILE_LIMIT / 2);
});

test('20,000 idle connections to SMTP submission: the API keeps serving new clients, and submission serves again afterwards', async () => {
  const api = new Api(`http://127.0.0.1:${ports.api}`);
  const before = openSockets();
  const attack = await flood([{ port: ports.submission, count: 20_000 }]);
  try {
    expect(openSockets() - before).toBeLessThanOrEqual(heldAtMost([LIMITS.submission]) + OWN_SOCKETS);
    expect(openDescriptors()).toBeLessThan(FILE_LIMIT / 2);
    // Fresh connections from another address: the API and the Web UI answer; the process is not starved.
    expect((await api.get('/health')).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${ports.ui}/api/v1/settings`)).status).toBe(200);
  } finally {
    attack.stop();
  }
  await until(
    async () => {
      const { dialog, greeting } = await SmtpDialog.open(ports.submission);
      dialog.close();
      return greeting.startsWith('220 ') ? true : undefined;
    },
    30_000,
    'SMTP submission to greet again',
  );
});

test('10× the connection limit on every listener at once: /health answers throughout, a workflow runs, the process is whole afterwards', async () => {
  const api = new Api(`http://127.0.0.1:${ports.api}`);
  const health = pollHealth();
  await new Promise((r) => setTimeout(r, 300));
  const before = openSockets();
  const attack = await flood([
    { port: ports.api, count: 10 * LIMITS.http },
    { port: ports.submission, count: 10 * LIMITS.submission },
    { port: ports.inbound, count: 10 * LIMITS.inbound },
    { port: ports.temporal, count: 10 * LIMITS.temporalGrpc },
    { port: ports.ui, count: 10 * LIMITS.temporalUi },
    { port: ports.metrics, count: 10 * LIMITS.metrics },
  ]);
  try {
    const total = Object.values(LIMITS).reduce((a, b) => a + b, 0);
    expect(attack.result.attempted).toBe(10 * total);
    expect(openSockets() - before).toBeLessThanOrEqual(heldAtMost(Object.values(LIMITS)) + OWN_SOCKETS);
    expect(openDescriptors()).toBeLessThan(FILE_LIMIT * 0.75);
    // Held as an attacker would: the polls go on, and the worker still runs workflows (a signup's
    // verification mail is one), which need threads and descriptors of their own, over the connections
    // to the dev server it made before the flood. Asked over the poller's own connection: a new one
    // would find the API's total full, as it should.
    const email = `flood-${Date.now()}@example.com`;
    expect((await call(health.agent, 'POST', '/auth/signup', { email, password: 'correct horse battery' })).status).toBe(201);
    await until(
      async () => ((await call(health.agent, 'GET', `/dev/mailbox?to=${encodeURIComponent(email)}`)).body?.data?.length ? true : undefined),
      30_000,
      'the verification mail (a workflow) during the flood',
    );
    expect(service.exitCode).toBeNull();
  } finally {
    attack.stop();
    await health.stop();
  }
  expect(health.statuses.length).toBeGreaterThan(10);
  expect(health.statuses.every((s) => s === 200)).toBe(true);

  // Afterwards every listener serves new clients, and the refusals were counted.
  await until(async () => ((await api.get('/health').catch(() => undefined))?.status === 200 ? true : undefined), 30_000, '/health after the flood');
  await signupMailArrives(api, 'after');
  const metrics = await until(
    async () => {
      const res = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`).catch(() => undefined);
      return res?.ok ? res.text() : undefined;
    },
    30_000,
    'metrics after the flood',
  );
  for (const listener of ['http', 'submission', 'inbound', 'temporalGrpc', 'temporalUi', 'metrics']) {
    expect(metrics).toMatch(new RegExp(`postbox_connections_refused_total\\{listener="${listener}",reason="(total|per_client)"\\} [1-9]`));
  }
  expect(service.exitCode).toBeNull();
  expect(output).not.toMatch(/uv loop|EMFILE|Failed to initialize/);
});

test("10× the capture SMTP server's limit: /health answers throughout, and the service's own mail is captured again afterwards", async () => {
  const api = new Api(`http://127.0.0.1:${ports.api}`);
  const health = pollHealth();
  await new Promise((r) => setTimeout(r, 300));
  const before = openSockets();
  const attack = await flood([{ port: ports.devSmtp, count: 10 * DEV_SMTP_LIMIT }]);
  try {
    expect(attack.result.attempted).toBe(10 * DEV_SMTP_LIMIT);
    expect(openSockets() - before).toBeLessThanOrEqual(heldAtMost([DEV_SMTP_LIMIT]) + OWN_SOCKETS);
    expect(service.exitCode).toBeNull();
  } finally {
    attack.stop();
    await health.stop();
  }
  expect(health.statuses.length).toBeGreaterThan(2);
  expect(health.statuses.every((s) => s === 200)).toBe(true);
  await signupMailArrives(api, 'after-smtp');
  const metrics = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
  expect(metrics).toMatch(/postbox_connections_refused_total\{listener="devSmtp",reason="(total|per_client)"\} [1-9]/);
  expect(service.exitCode).toBeNull();
  expect(output).not.toMatch(/uv loop|EMFILE|Failed to initialize/);
});
