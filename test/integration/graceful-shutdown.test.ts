import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../src/db/embedded-postgres';
import { createTestDatabase, dbQuery } from '../setup/db';
import { Api, createAccount } from '../setup/service';
import { ACCOUNT_MAIL_SENDER, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

const MAIN = path.resolve(__dirname, '../../dist/src/main.js');
const SENDERS = 16;
/** How long the process may take from SIGTERM to exit. */
const EXIT_BOUND_MS = 20_000;
/** SHUTDOWN_DRAIN_SECONDS in this test. */
const DRAIN_MS = 3000;

/** A request on a connection of its own (no keep-alive pool): what a fresh client or a load balancer sends. */
function freshRequest(port: number, key: string, n: number): Promise<number | string> {
  return new Promise((resolve) => {
    const body = JSON.stringify({ email: `burst${n}@example.com`, event: 'load', data: { n: 100_000 + n } });
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/v1/track',
        agent: false,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', (err) => resolve((err as NodeJS.ErrnoException).code ?? String(err)));
    req.end(body);
  });
}

interface Outcome {
  n: number;
  startedAt: number;
  status?: number;
  /** The connection-level error code when there was no response. */
  error?: string;
}

let smtp: SmtpSink;
beforeAll(async () => {
  if (!fs.existsSync(MAIN)) throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
  smtp = await new SmtpSink().start();
});
afterAll(() => smtp.stop());

test('SIGTERM under load: every accepted track is stored, later requests are refused, the process exits 0', async () => {
  const port = await freePort();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-shutdown-'));
  const databaseUrl = await createTestDatabase();
  const child: ChildProcess = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DATABASE_URL: databaseUrl,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      SMTP_URL: smtp.url,
      SYSTEM_EMAIL_FROM: ACCOUNT_MAIL_SENDER,
      TEMPORAL_DEV_SERVER_PORT: '0',
      TEMPORAL_DEV_SERVER_PERSISTENCE: 'memory',
      RATE_LIMIT_PER_MINUTE: '1000000',
      // The load comes from one address with the public key.
      PUBLIC_RATE_LIMIT_PER_MINUTE: '1000000',
      PUBLIC_RATE_LIMIT_PER_CLIENT_PER_MINUTE: '1000000',
      DATABASE_POOL_MAX: '5',
      SHUTDOWN_DRAIN_SECONDS: String(DRAIN_MS / 1000),
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const api = new Api(`http://127.0.0.1:${port}`);
  // The load stops when the test ends, however it ends.
  let running = true;
  try {
    await until(
      async () => {
        if (child.exitCode !== null) throw new Error(`exited early:\n${output}`);
        return (await api.get('/health').catch(() => undefined))?.status === 200 ? true : undefined;
      },
      90_000,
      'the service to be healthy',
    );
    const { project } = await createAccount(api);

    const outcomes: Outcome[] = [];
    let next = 0;
    const sender = async () => {
      while (running) {
        const outcome: Outcome = { n: next++, startedAt: Date.now() };
        try {
          const res = await fetch(`${api.baseUrl}/v1/track`, {
            method: 'POST',
            headers: { authorization: `Bearer ${project.publicKey}`, 'content-type': 'application/json' },
            body: JSON.stringify({ email: `load${outcome.n}@example.com`, event: 'load', data: { n: outcome.n } }),
          });
          await res.arrayBuffer();
          outcome.status = res.status;
        } catch (err) {
          const cause = (err as { cause?: { code?: string } }).cause;
          outcome.error = cause?.code ?? String(err);
          await new Promise((r) => setTimeout(r, 10));
        }
        outcomes.push(outcome);
      }
    };
    const senders = Array.from({ length: SENDERS }, sender);

    // Steady load first, then the signal in the middle of it.
    await until(async () => (outcomes.filter((o) => o.status === 200).length >= 300 ? true : undefined), 60_000, 'steady load');
    // A burst on fresh connections, and the signal 30 ms later: those connections sit in the accept
    // queue when SIGTERM arrives, and must be answered, not reset.
    const burst = Promise.all(Array.from({ length: 40 }, (_, i) => freshRequest(port, project.publicKey, i)));
    await new Promise((r) => setTimeout(r, 30));
    const signalledAt = Date.now();
    child.kill('SIGTERM');
    // The load balancer's signal to stop sending: /health is 503 while the listener still serves.
    await new Promise((r) => setTimeout(r, 200));
    const draining = await api.get('/health').catch(() => undefined);
    expect(draining?.status).toBe(503);
    expect(draining?.body.failing).toEqual(['shutdown']);
    // Each answer in the drain closes its connection, so no client sends on a kept-alive one the close will cut.
    expect(draining?.headers.get('connection')).toBe('close');
    expect(await burst).toEqual(Array.from({ length: 40 }, () => 200));
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([exited, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), EXIT_BOUND_MS)))]);
    clearTimeout(timer);
    const exitedAt = Date.now();
    // Load goes on a while after the exit, to see what a client meets then.
    await new Promise((r) => setTimeout(r, 1000));
    running = false;
    await Promise.all(senders);

    expect({ code, output: code === 0 ? '' : output }).toEqual({ code: 0, output: '' });
    expect(exitedAt - signalledAt).toBeLessThan(EXIT_BOUND_MS);
    expect(output).toMatch(/"msg":"shutting down"/);
    expect(output).toMatch(/"msg":"stopped"/);

    // Every answer was a success: no 5xx, no half-written response.
    const answered = outcomes.filter((o) => o.status !== undefined);
    expect(answered.filter((o) => o.status !== 200)).toEqual([]);
    // Nothing accepted was lost.
    const stored = new Set((await dbQuery<{ n: number }>(databaseUrl, `SELECT (data->>'n')::int AS n FROM events WHERE name = 'load'`)).map((r) => r.n));
    expect(answered.filter((o) => !stored.has(o.n)).map((o) => o.n)).toEqual([]);
    // What was not answered failed at the connection, never with a response.
    const failed = outcomes.filter((o) => o.error !== undefined);
    expect(failed.filter((o) => !['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(o.error!))).toEqual([]);
    // The listener keeps serving for the drain: requests made in it are answered, none reset. Only its
    // first half counts, as a request started near its end may reach the listener after it closed.
    const inDrain = outcomes.filter((o) => o.startedAt >= signalledAt && o.startedAt < signalledAt + DRAIN_MS / 2);
    expect(inDrain.length).toBeGreaterThan(0);
    expect(inDrain.filter((o) => o.status !== 200)).toEqual([]);
    // Then it closes: requests made after the exit find no one.
    const late = outcomes.filter((o) => o.startedAt > exitedAt);
    expect(late.length).toBeGreaterThan(0);
    expect(late.filter((o) => o.error !== 'ECONNREFUSED')).toEqual([]);
    // The requests in flight at the signal were answered, not cut.
    expect(answered.some((o) => o.startedAt <= signalledAt && o.startedAt > signalledAt - 200)).toBe(true);
  } finally {
    running = false;
    if (child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 180_000);
