import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
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
      DATABASE_POOL_MAX: '5',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const api = new Api(`http://127.0.0.1:${port}`);
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
    let running = true;
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
    const signalledAt = Date.now();
    child.kill('SIGTERM');
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
    const stored = new Set(
      (await dbQuery<{ n: number }>(databaseUrl, `SELECT (data->>'n')::int AS n FROM events WHERE name = 'load'`)).map((r) => r.n),
    );
    expect(answered.filter((o) => !stored.has(o.n)).map((o) => o.n)).toEqual([]);
    // What was not answered failed at the connection, never with a response.
    const failed = outcomes.filter((o) => o.error !== undefined);
    expect(failed.filter((o) => !['ECONNREFUSED', 'ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE'].includes(o.error!))).toEqual([]);
    // The listener closes at the signal: requests made after it (and after the exit) find no one.
    const late = outcomes.filter((o) => o.startedAt > signalledAt + 500);
    expect(late.filter((o) => o.startedAt > exitedAt).length).toBeGreaterThan(0);
    expect(late.filter((o) => o.error !== 'ECONNREFUSED')).toEqual([]);
    // The requests in flight at the signal were answered, not cut.
    expect(answered.some((o) => o.startedAt <= signalledAt && o.startedAt > signalledAt - 200)).toBe(true);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 180_000);
