import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService, workerEnvOf } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';

const RECIPIENTS = 5000;
// What can be sent again after a kill: messages SMTP accepted whose outcome was not yet recorded,
// at most the killed process's DELIVERY_IN_FLIGHT (8 here; unset, it is 4 × SMTP_POOL_SIZE).
const DUPLICATE_BOUND = 8;

const MAIN = path.resolve(__dirname, '../../dist/src/main.js');

/** A worker process of the built service: `node dist/src/main.js worker`. */
function startWorker(env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [MAIN, 'worker'], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let api: TestService;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  if (!fs.existsSync(MAIN)) throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  smtp.parse = false;
  api = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, JWT_SECRET: 'one secret for the api and its workers' }, 'api');
});
afterAll(async () => {
  for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
  await api.stop();
  await smtp.stop();
  await dns.stop();
});

test(`killing the worker in the middle of a ${RECIPIENTS}-recipient campaign loses no recipient; duplicates stay under ${DUPLICATE_BOUND}`, async () => {
  const acct = await createAccount(api.api, 'Crash');
  const key = { key: acct.project.secretKey };
  await verifiedDomain(api.api, dns, acct.project.secretKey, 'crash.test');
  await dbQuery(
    api.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT gen_random_uuid(), $1, 'r' || i || '@crash.test', true, jsonb_build_object('n', i) FROM generate_series(1, $2) AS i`,
    [acct.project.id, RECIPIENTS],
  );
  const workerEnv = {
    ...workerEnvOf(api, smtp.url, dns.address),
    CAMPAIGN_BATCH_SIZE: '500',
    DELIVERY_IN_FLIGHT: String(DUPLICATE_BOUND),
  };
  const first = startWorker(workerEnv);
  workers.push(first);

  const c = (
    await api.api.post('/campaigns', { name: 'Big', subject: 'Hello {{n}}', body: '<p>Number {{n}}</p>', from: 'news@crash.test', audienceType: 'ALL' }, key)
  ).body.data;
  await api.api.post(`/campaigns/${c.id}/send`, {}, key);
  await smtp.waitFor(1500, 120_000);
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  const atKill = smtp.received.length;
  expect(atKill).toBeLessThan(RECIPIENTS);

  workers.push(startWorker(workerEnv));
  const deadline = Date.now() + 180_000;
  let unique = 0;
  while (Date.now() < deadline) {
    unique = new Set(smtp.received.map((m) => m.envelope.to[0])).size;
    const { status } = (await api.api.get(`/campaigns/${c.id}`, key)).body;
    if (unique === RECIPIENTS && status === 'SENT') break;
    await new Promise((r) => setTimeout(r, 500));
  }
  expect(unique).toBe(RECIPIENTS);
  const duplicates = smtp.received.length - unique;
  expect(duplicates).toBeLessThanOrEqual(DUPLICATE_BOUND);
  const stats = (await api.api.get(`/campaigns/${c.id}/stats`, key)).body;
  expect(stats).toMatchObject({ status: 'SENT', totalRecipients: RECIPIENTS, sent: RECIPIENTS, queued: 0, failed: 0 });

  console.log(`campaign crash test: ${atKill} delivered before the kill, ${duplicates} duplicates after it (bound ${DUPLICATE_BOUND})`);
}, 400_000);

test('killing the worker during an A/B test’s wait: the wait goes on in the next worker, and nobody gets two variants', async () => {
  const N = 200;
  const acct = await createAccount(api.api, 'AbCrash');
  const key = { key: acct.project.secretKey };
  await verifiedDomain(api.api, dns, acct.project.secretKey, 'abcrash.test');
  await dbQuery(
    api.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT gen_random_uuid(), $1, 'r' || i || '@abcrash.test', true, '{}'::jsonb FROM generate_series(1, $2) AS i`,
    [acct.project.id, N],
  );
  const workerEnv = { ...workerEnvOf(api, smtp.url, dns.address), CAMPAIGN_BATCH_SIZE: '25' };
  const first = startWorker(workerEnv);
  workers.push(first);
  const abTest = { variants: [{ subject: 'A' }, { subject: 'B' }], testPercent: 30, waitMinutes: 1, winnerCriteria: 'opens' };
  const c = (await api.api.post('/campaigns', { name: 'AB', subject: 'S', body: '<p>Hi</p>', from: 'news@abcrash.test', audienceType: 'ALL', abTest }, key))
    .body.data;
  await api.api.post(`/campaigns/${c.id}/send`, {}, key);
  const statusOf = async () => (await api.api.get(`/campaigns/${c.id}`, key)).body.status;
  const mine = () => smtp.received.filter((m) => m.envelope.to[0].endsWith('@abcrash.test'));
  for (let deadline = Date.now() + 60_000; (await statusOf()) !== 'TESTING';) {
    if (Date.now() > deadline) throw new Error('the sample was not sent');
    await new Promise((r) => setTimeout(r, 200));
  }
  first.kill('SIGKILL');
  await new Promise((r) => first.once('exit', r));
  expect(mine()).toHaveLength(60);

  workers.push(startWorker(workerEnv));
  for (let deadline = Date.now() + 180_000; (await statusOf()) !== 'SENT';) {
    if (Date.now() > deadline) throw new Error('the campaign was not sent');
    await new Promise((r) => setTimeout(r, 500));
  }
  const byRecipient = Map.groupBy(mine(), (m) => m.envelope.to[0]);
  expect(byRecipient.size).toBe(N);
  for (const [, got] of byRecipient) expect(got).toHaveLength(1);
  const rows = await dbQuery(api.databaseUrl, `SELECT variant_id, count(*)::int AS n FROM emails WHERE campaign_id = $1 GROUP BY 1 ORDER BY 1`, [c.id]);
  // No opens: a tie, which goes to A; the 140 held get A.
  expect(rows).toEqual([
    { variant_id: 'A', n: 170 },
    { variant_id: 'B', n: 30 },
  ]);
}, 300_000);
