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
/** The relay's answer time while a backlog builds: slow enough that the pool drains slower than mail is queued. */
const SLOW_RELAY_MS = 1000;

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

/** RECIPIENTS subscribed contacts at `domain`, and every other contact of the project unsubscribed: the next campaign's audience. */
async function audienceAt(prefix: string, domain: string): Promise<void> {
  await dbQuery(
    api.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed)
     SELECT gen_random_uuid(), $1, $3::text || i || '@' || $4::text, true FROM generate_series(1, $2) AS i`,
    [acct.project.id, RECIPIENTS, prefix, domain],
  );
  await dbQuery(api.databaseUrl, `UPDATE contacts SET subscribed = false WHERE project_id = $1 AND email NOT LIKE '%@' || $2::text`, [acct.project.id, domain]);
}

/** A campaign to every subscribed contact, sent now; answers its id. */
async function sendCampaign(name: string): Promise<string> {
  const c = (await api.api.post('/campaigns', { name, subject: 'Hi', body: '<p>Hi</p>', from: 'news@pool.test', audienceType: 'ALL' }, key)).body.data;
  await api.api.post(`/campaigns/${c.id}/send`, {}, key);
  return c.id;
}

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
  await audienceAt('c', 'pool.test');
  const before = await shares();
  const c = { id: await sendCampaign('Pool') };
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

/**
 * A worker joins, /v1/send mail is queued behind the slow relay, and once `holding` says the worker holds
 * its share claimed it gets `signal`. Watched while mail is still queued, since a loaded machine may
 * accept the sends no faster than the pool drains them.
 */
async function stoppedWhileHolding(
  signal: NodeJS.Signals,
  backlog: { prefix: string; domain: string },
  holding: (w: PoolWorker) => Promise<boolean>,
  what: string,
): Promise<PoolWorker> {
  const worker = await startWorker();
  joiners.push(worker);
  smtp.delayMs = SLOW_RELAY_MS;
  const queued = sendMany(BACKLOG, backlog.prefix, backlog.domain);
  try {
    await until(async () => ((await holding(worker)) ? true : undefined), 90_000, what);
    worker.child.kill(signal);
    await new Promise((r) => worker.child.once('exit', r));
  } finally {
    smtp.delayMs = 0;
    await queued;
  }
  return worker;
}

test('a worker that joins takes its share of /v1/send at once, and one that stops (SIGTERM) gives back what it holds claimed', async () => {
  // Its dispatchers claim from the shared queue as soon as it runs: it delivers, and holds more.
  const joiner = await stoppedWhileHolding(
    'SIGTERM',
    { prefix: 'j', domain: 'join.test' },
    async (w) => (await sentBy(w)) > 0 && (await heldBy(w)) >= 50,
    'the new worker delivering',
  );
  // Left to expire, its claims would hold that mail back for CLAIM_SECONDS (2 minutes).
  expect(await heldBy(joiner)).toBe(0);
  await until(async () => (new Set(receivedAt('join.test')).size === BACKLOG ? true : undefined), 60_000, 'every send delivered');
  expect(receivedAt('join.test')).toHaveLength(BACKLOG);
}, 240_000);

test('a worker killed (SIGKILL) while it holds /v1/send mail claimed loses none of it: the pool sends it once the claims expire', async () => {
  const doomed = await stoppedWhileHolding(
    'SIGKILL',
    { prefix: 'd', domain: 'dead.test' },
    async (w) => (await heldBy(w)) >= 50,
    'the doomed worker holding claims',
  );
  expect(await heldBy(doomed)).toBeGreaterThan(0);
  // The other workers' dispatchers sleep until the dead claims expire (CLAIM_SECONDS), then take them.
  await until(async () => (new Set(receivedAt('dead.test')).size === BACKLOG ? true : undefined), 200_000, 'every send delivered after the kill');
  const to = receivedAt('dead.test');
  // Only what SMTP accepted and the killed worker had not recorded goes twice (DELIVERY_IN_FLIGHT, 64 by default).
  expect(to.length - BACKLOG).toBeLessThanOrEqual(64);
  const [left] = await dbQuery<{ n: number }>(api.databaseUrl, `SELECT count(*)::int AS n FROM emails WHERE status = 'QUEUED' AND to_email LIKE '%@dead.test'`);
  expect(left.n).toBe(0);
}, 300_000);

test('cancelling a campaign that every worker is sending stops them all at once: only what was in flight leaves, the counters match the sink', async () => {
  await audienceAt('x', 'cancel.test');
  const before = await shares();
  smtp.delayMs = SLOW_RELAY_MS;
  try {
    const c = { id: await sendCampaign('Cancel') };
    // Under way on every worker before the cancel.
    await until(async () => ((await shares()).every((n, i) => n > before[i]) ? true : undefined), 60_000, 'every worker sending');
    expect((await api.api.post(`/campaigns/${c.id}/cancel`, {}, key)).body.data.status).toBe('CANCELLED');
    // Counted from the answer: the cancel is committed by then, and every worker hears of it at the commit.
    const atCancel = receivedAt('cancel.test').length;
    // Then the sink's count stops moving.
    let received = -1;
    for (const deadline = Date.now() + 60_000; received !== receivedAt('cancel.test').length;) {
      if (Date.now() > deadline) throw new Error('mail still arriving a minute after the cancel');
      received = receivedAt('cancel.test').length;
      await new Promise((r) => setTimeout(r, 1500));
    }
    // Each worker's chunks in flight hold many more recipients than its permits (DELIVERY_IN_FLIGHT, 64);
    // only the messages under way may still leave, not the rest of the chunks.
    expect(received - atCancel).toBeLessThanOrEqual(WORKERS * 64);
    expect(received).toBeLessThan(RECIPIENTS);
    const [q] = await dbQuery(api.databaseUrl, `SELECT count(*)::int AS q FROM emails WHERE campaign_id = $1 AND status = 'QUEUED'`, [c.id]);
    expect(q.q).toBe(0);
    const stats = (await api.api.get(`/campaigns/${c.id}/stats`, key)).body;
    expect(stats.status).toBe('CANCELLED');
    expect(stats.sent + stats.cancelled).toBe(RECIPIENTS);
    expect(stats.sent).toBe(received);
  } finally {
    smtp.delayMs = 0;
  }
}, 240_000);

test('a worker killed and another stopped in the middle of a campaign lose no recipient, and its counters stay exact', async () => {
  await audienceAt('k', 'kill.test');
  const c = { id: await sendCampaign('Kill') };
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
