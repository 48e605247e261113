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
/** Transactional mail queued at once against a slow relay, so that drains hold claims. */
const BACKLOG = 2000;

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
/** Workers that join the pool later and leave it again (stopped or killed). */
const joiners: PoolWorker[] = [];

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
  for (const w of [...workers, ...joiners]) if (w.child.exitCode === null) w.child.kill('SIGKILL');
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
  const stats = (await api.api.get(`/campaigns/${c.id}/stats`, key)).body;
  expect(stats).toMatchObject({ status: 'SENT', totalRecipients: RECIPIENTS, sent: RECIPIENTS, queued: 0, failed: 0 });
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

/** Transactional mail a worker holds claimed and has not sent yet (its dispatchers' ids carry its pid). */
async function heldBy(w: PoolWorker): Promise<number> {
  const [row] = await dbQuery<{ n: number }>(
    api.databaseUrl,
    `SELECT count(*)::int AS n FROM emails WHERE status = 'QUEUED' AND claimed_until > now() AND claimed_by LIKE $1`,
    [`%:${w.child.pid}:%`],
  );
  return row.n;
}

/** Queues `n` /v1/send messages to `<prefix><i>@<domain>`, 16 requests at a time. */
async function sendMany(n: number, prefix: string, domain: string): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < n) {
        const i = next++;
        const res = await api.api.post('/v1/send', { to: `${prefix}${i}@${domain}`, from: 'hi@pool.test', subject: 'Hi', body: 'x' }, key);
        expect(res.status).toBe(200);
      }
    }),
  );
}

const receivedAt = (domain: string) => smtp.received.map((m) => m.envelope.to[0]).filter((t) => t.endsWith(`@${domain}`));

test('a worker that joins takes its share of /v1/send at once, and one that stops (SIGTERM) gives back what it holds claimed', async () => {
  const joiner = await startWorker();
  joiners.push(joiner);
  // A slow relay and a backlog: every drain holds a claimed batch for a while.
  smtp.delayMs = 300;
  try {
    await sendMany(BACKLOG, 'j', 'join.test');
    // Its dispatchers claim from the shared queue as soon as it runs: it delivers, and holds more.
    await until(async () => ((await sentBy(joiner)) > 0 && (await heldBy(joiner)) >= 50 ? true : undefined), 60_000, 'the new worker delivering');
    joiner.child.kill('SIGTERM');
    await new Promise((r) => joiner.child.once('exit', r));
    // Left to expire, its claims would hold that mail back for CLAIM_SECONDS (2 minutes).
    expect(await heldBy(joiner)).toBe(0);
    await until(async () => (new Set(receivedAt('join.test')).size === BACKLOG ? true : undefined), 60_000, 'every send delivered');
  } finally {
    smtp.delayMs = 0;
  }
  expect(receivedAt('join.test')).toHaveLength(BACKLOG);
}, 240_000);

test('a worker killed (SIGKILL) while it holds /v1/send mail claimed loses none of it: the pool sends it once the claims expire', async () => {
  const doomed = await startWorker();
  joiners.push(doomed);
  smtp.delayMs = 300;
  try {
    await sendMany(BACKLOG, 'd', 'dead.test');
    await until(async () => ((await heldBy(doomed)) >= 50 ? true : undefined), 60_000, 'the doomed worker holding claims');
    doomed.child.kill('SIGKILL');
    await new Promise((r) => doomed.child.once('exit', r));
    expect(await heldBy(doomed)).toBeGreaterThan(0);
  } finally {
    smtp.delayMs = 0;
  }
  // The other workers' dispatchers sleep until the dead claims expire (CLAIM_SECONDS), then take them.
  await until(async () => (new Set(receivedAt('dead.test')).size === BACKLOG ? true : undefined), 200_000, 'every send delivered after the kill');
  const to = receivedAt('dead.test');
  // Only what SMTP accepted and the killed worker had not recorded goes twice (DELIVERY_IN_FLIGHT, 64 by default).
  expect(to.length - BACKLOG).toBeLessThanOrEqual(64);
  const [left] = await dbQuery<{ n: number }>(api.databaseUrl, `SELECT count(*)::int AS n FROM emails WHERE status = 'QUEUED' AND to_email LIKE '%@dead.test'`);
  expect(left.n).toBe(0);
}, 300_000);

test('cancelling a campaign that every worker is sending stops them all: nothing more leaves, the counters match the sink', async () => {
  await dbQuery(
    api.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed) SELECT gen_random_uuid(), $1, 'x' || i || '@cancel.test', true FROM generate_series(1, $2) AS i`,
    [acct.project.id, RECIPIENTS],
  );
  await dbQuery(api.databaseUrl, `UPDATE contacts SET subscribed = false WHERE project_id = $1 AND email NOT LIKE '%@cancel.test'`, [acct.project.id]);
  const before = await shares();
  smtp.delayMs = 100;
  try {
    const c = (await api.api.post('/campaigns', { name: 'Cancel', subject: 'Hi', body: '<p>Hi</p>', from: 'news@pool.test', audienceType: 'ALL' }, key)).body
      .data;
    await api.api.post(`/campaigns/${c.id}/send`, {}, key);
    // Under way on every worker before the cancel.
    await until(async () => ((await shares()).every((n, i) => n > before[i]) ? true : undefined), 60_000, 'every worker sending');
    expect((await api.api.post(`/campaigns/${c.id}/cancel`, {}, key)).body.data.status).toBe('CANCELLED');
    await until(
      async () => {
        const [r] = await dbQuery(api.databaseUrl, `SELECT count(*)::int AS q FROM emails WHERE campaign_id = $1 AND status = 'QUEUED'`, [c.id]);
        return r.q === 0 ? true : undefined;
      },
      60_000,
      'nothing of the campaign queued',
    );
    await new Promise((r) => setTimeout(r, 1500));
    const received = receivedAt('cancel.test').length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(receivedAt('cancel.test')).toHaveLength(received);
    expect(received).toBeLessThan(RECIPIENTS);
    const stats = (await api.api.get(`/campaigns/${c.id}/stats`, key)).body;
    expect(stats.status).toBe('CANCELLED');
    expect(stats.sent + stats.cancelled).toBe(RECIPIENTS);
    expect(stats.sent).toBe(received);
  } finally {
    smtp.delayMs = 0;
  }
}, 240_000);

test('a worker killed and another stopped in the middle of a campaign lose no recipient, and its counters stay exact', async () => {
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
  // A graceful stop too: its chunks in flight end early and their rest is planned again.
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
  const stats = (await api.api.get(`/campaigns/${c.id}/stats`, key)).body;
  expect(stats).toMatchObject({ status: 'SENT', totalRecipients: RECIPIENTS, sent: RECIPIENTS, queued: 0, failed: 0 });
}, 400_000);
