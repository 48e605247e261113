/**
 * A pool of workers shares the delivery: one API process and three worker processes on one PostgreSQL
 * and one Temporal server. Each worker's share is read from its own `postbox_email_deliveries_total`
 * (METRICS_PORT), as an operator would; the listener counts every message, so duplicates show.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService, workerEnvOf } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

const MAIN = path.resolve(__dirname, '../../dist/src/main.js');
const WORKERS = 3;
const RECIPIENTS = 3000;
const SENDS = 600;

interface PoolWorker {
  child: ChildProcess;
  metricsPort: number;
}

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let api: TestService;
let acct: Account;
let key: { key: string };
const workers: PoolWorker[] = [];

async function startWorker(): Promise<PoolWorker> {
  const metricsPort = await freePort();
  const child = spawn(process.execPath, [MAIN, 'worker'], {
    env: { ...workerEnvOf(api, smtp.url, dns.address), METRICS_PORT: String(metricsPort), CAMPAIGN_BATCH_SIZE: '100', DATABASE_POOL_MAX: '4' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const worker = { child, metricsPort };
  await until(async () => ((await fetch(`http://127.0.0.1:${metricsPort}/health`).catch(() => undefined))?.ok ? true : undefined), 60_000, 'a worker polling');
  return worker;
}

/** How many messages SMTP accepted from this worker (its own counter). */
async function sentBy(w: PoolWorker): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${w.metricsPort}/metrics`)).text();
  return Number(/^postbox_email_deliveries_total\{outcome="sent"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

const shares = async () => Promise.all(workers.map(sentBy));

beforeAll(async () => {
  if (!fs.existsSync(MAIN)) throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  smtp.parse = false;
  api = await startTestService(
    { DNS_SERVERS: dns.address, SMTP_URL: smtp.url, JWT_SECRET: 'one secret for the api and its workers', RATE_LIMIT_PER_MINUTE: '100000' },
    'api',
  );
  acct = await createAccount(api.api, 'Pool');
  key = { key: acct.project.secretKey };
  await verifiedDomain(api.api, dns, acct.project.secretKey, 'pool.test');
  for (let i = 0; i < WORKERS; i++) workers.push(await startWorker());
}, 240_000);
afterAll(async () => {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  await api?.stop();
  await smtp?.stop();
  await dns?.stop();
});

test(`a ${RECIPIENTS}-recipient campaign is delivered by every worker (each at least 15%), every recipient once`, async () => {
  await dbQuery(
    api.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed) SELECT gen_random_uuid(), $1, 'c' || i || '@pool.test', true FROM generate_series(1, $2) AS i`,
    [acct.project.id, RECIPIENTS],
  );
  const before = await shares();
  const c = (await api.api.post('/campaigns', { name: 'Pool', subject: 'Hi', body: '<p>Hi</p>', from: 'news@pool.test', audienceType: 'ALL' }, key)).body.data;
  await api.api.post(`/campaigns/${c.id}/send`, {}, key);
  await until(async () => ((await api.api.get(`/campaigns/${c.id}`, key)).body.status === 'SENT' ? true : undefined), 180_000, 'the campaign SENT');
  const by = (await shares()).map((n, i) => n - before[i]);
  expect(by.reduce((a, b) => a + b, 0)).toBe(RECIPIENTS);
  for (const n of by) expect(n).toBeGreaterThanOrEqual(0.15 * RECIPIENTS);
  const to = smtp.received.map((m) => m.envelope.to[0]).filter((t) => t.endsWith('@pool.test'));
  expect(new Set(to).size).toBe(RECIPIENTS);
  expect(to).toHaveLength(RECIPIENTS);
}, 240_000);

test(`${SENDS} /v1/send messages are delivered by every worker (each at least 10%), each once`, async () => {
  const before = await shares();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < SENDS) {
        const i = next++;
        const res = await api.api.post('/v1/send', { to: `t${i}@send.test`, from: 'hi@pool.test', subject: 'Hi', body: 'x' }, key);
        expect(res.status).toBe(200);
      }
    }),
  );
  await until(
    async () => ((await shares()).reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0) >= SENDS ? true : undefined),
    120_000,
    'every send delivered',
  );
  const by = (await shares()).map((n, i) => n - before[i]);
  for (const n of by) expect(n).toBeGreaterThanOrEqual(0.1 * SENDS);
  const to = smtp.received.map((m) => m.envelope.to[0]).filter((t) => t.endsWith('@send.test'));
  expect(new Set(to).size).toBe(SENDS);
  expect(to).toHaveLength(SENDS);
}, 240_000);

test('a worker that stops gives its claims back, and one killed in the middle of a campaign loses nothing', async () => {
  await dbQuery(
    api.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed) SELECT gen_random_uuid(), $1, 'k' || i || '@kill.test', true FROM generate_series(1, $2) AS i`,
    [acct.project.id, RECIPIENTS],
  );
  await dbQuery(api.databaseUrl, `UPDATE contacts SET subscribed = false WHERE project_id = $1 AND email NOT LIKE '%@kill.test'`, [acct.project.id]);
  const c = (await api.api.post('/campaigns', { name: 'Kill', subject: 'Hi', body: '<p>Hi</p>', from: 'news@pool.test', audienceType: 'ALL' }, key)).body.data;
  await api.api.post(`/campaigns/${c.id}/send`, {}, key);
  await until(
    async () => (smtp.received.filter((m) => m.envelope.to[0].endsWith('@kill.test')).length > 500 ? true : undefined),
    120_000,
    'the campaign under way',
  );
  const killed = workers[0];
  killed.child.kill('SIGKILL');
  // A graceful stop too: its dispatchers are cancelled and nothing it claimed stays claimed.
  const stopped = workers[1];
  stopped.child.kill('SIGTERM');
  await new Promise((r) => stopped.child.once('exit', r));
  await until(
    async () => ((await api.api.get(`/campaigns/${c.id}`, key)).body.status === 'SENT' ? true : undefined),
    240_000,
    'the campaign SENT after the kill',
  );
  const to = smtp.received.map((m) => m.envelope.to[0]).filter((t) => t.endsWith('@kill.test'));
  expect(new Set(to).size).toBe(RECIPIENTS);
  // What a killed worker can send twice: what SMTP accepted and it had not recorded (DELIVERY_IN_FLIGHT, 64 by default).
  expect(to.length - RECIPIENTS).toBeLessThanOrEqual(64);
  const [held] = await dbQuery(api.databaseUrl, `SELECT count(*)::int AS n FROM emails WHERE status = 'QUEUED' AND claimed_by IS NOT NULL`);
  expect(held.n).toBe(0);
}, 400_000);
