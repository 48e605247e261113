import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { embeddedDatabaseUrl, freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { Api, createAccount } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';

const RECIPIENTS = 3000;
const POOL_SIZE = 8;
const MAIN = path.resolve(__dirname, '../../dist/src/main.js');

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let service: ChildProcess | undefined;
let output = '';
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-pg-restart-'));

beforeAll(async () => {
  if (!fs.existsSync(MAIN)) throw new Error('dist/ is missing: run `npm run build` (npm test does it first)');
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  smtp.parse = false;
});
afterAll(async () => {
  if (service && service.exitCode === null) {
    service.kill('SIGTERM');
    await new Promise((r) => service!.once('exit', r));
  }
  await smtp.stop();
  await dns.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** The campaign's messages (the account's own verification mail goes to the same listener). */
const campaignMail = () => smtp.received.filter((m) => m.envelope.to[0].endsWith('@restart.test'));

/** The postmaster's pid, from the first line of postmaster.pid. */
const postmasterPid = () => Number(fs.readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);

/**
 * A /v1/send after the outage arrives: the dispatchers sleep until a NOTIFY wakes them, so this
 * proves their listener came back with the database.
 */
async function sendArrives(api: Api, key: { key: string }, to: string): Promise<void> {
  const res = await api.post('/v1/send', { to, from: 'hello@restart.test', subject: 'After the outage', body: '<p>Hi</p>' }, key);
  expect(res.status).toBe(200);
  const deadline = Date.now() + 30_000;
  while (!smtp.received.some((m) => m.envelope.to[0] === to)) {
    if (Date.now() > deadline) throw new Error(`${to} never arrived after the database came back`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Waits until /health has answered 503 and then 200 again. */
async function throughOutage(health: () => Promise<number>): Promise<Set<number>> {
  const statuses = new Set<number>();
  const deadline = Date.now() + 60_000;
  for (;;) {
    const status = await health();
    statuses.add(status);
    if (statuses.has(503) && status === 200) return statuses;
    if (Date.now() > deadline) throw new Error(`/health never came back: ${[...statuses]}\n${output}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

test(`kill -9 of embedded PostgreSQL mid-campaign: service up, /health 503 then 200, none lost, ≤ ${POOL_SIZE} duplicates, later mail sent`, async () => {
  const port = await freePort();
  const devServerPort = String(await freePort());
  const start = () =>
    spawn(process.execPath, [MAIN], {
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        DATA_DIR: dataDir,
        PORT: String(port),
        HOST: '127.0.0.1',
        SMTP_URL: smtp.url,
        SMTP_POOL_SIZE: String(POOL_SIZE),
        DELIVERY_IN_FLIGHT: String(POOL_SIZE),
        DNS_SERVERS: dns.address,
        TEMPORAL_DEV_SERVER_PORT: devServerPort,
        TEMPORAL_UI: 'off',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  service = start();
  service.stdout!.on('data', (d) => (output += d));
  service.stderr!.on('data', (d) => (output += d));
  const api = new Api(`http://127.0.0.1:${port}`);
  const health = async () => (await api.get('/health').catch(() => ({ status: 0 }))).status;
  for (let i = 0; (await health()) !== 200; i++) {
    if (service.exitCode !== null || i > 600) throw new Error(`service did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }

  const acct = await createAccount(api, 'Restart');
  const key = { key: acct.project.secretKey };
  await verifiedDomain(api, dns, acct.project.secretKey, 'restart.test');
  await dbQuery(
    embeddedDatabaseUrl(dataDir),
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT gen_random_uuid(), $1, 'r' || i || '@restart.test', true, jsonb_build_object('n', i) FROM generate_series(1, $2) AS i`,
    [acct.project.id, RECIPIENTS],
  );
  const c = (
    await api.post('/campaigns', { name: 'Big', subject: 'Hello {{n}}', body: '<p>Number {{n}}</p>', from: 'news@restart.test', audienceType: 'ALL' }, key)
  ).body.data;
  expect((await api.post(`/campaigns/${c.id}/send`, {}, key)).status).toBe(200);
  await smtp.waitFor(500, 120_000);

  process.kill(postmasterPid(), 'SIGKILL');
  const statuses = await throughOutage(health);
  expect(service.exitCode).toBeNull();
  expect(output).toMatch(/embedded PostgreSQL exited; restarting it/);

  const finished = Date.now() + 180_000;
  let unique = 0;
  while (Date.now() < finished) {
    unique = new Set(campaignMail().map((m) => m.envelope.to[0])).size;
    const res = await api.get(`/campaigns/${c.id}`, key);
    if (unique === RECIPIENTS && res.body.status === 'SENT') break;
    await new Promise((r) => setTimeout(r, 500));
  }
  expect(unique).toBe(RECIPIENTS);
  const duplicates = campaignMail().length - unique;
  expect(duplicates).toBeLessThanOrEqual(POOL_SIZE);
  const stats = (await api.get(`/campaigns/${c.id}/stats`, key)).body;
  expect(stats).toMatchObject({ status: 'SENT', totalRecipients: RECIPIENTS, sent: RECIPIENTS, queued: 0, failed: 0 });
  expect(service.exitCode).toBeNull();
  await sendArrives(api, key, 'after-first@elsewhere.test');

  // The service killed: its postmaster lives on, and the restarted service joins it. That process
  // restarts the postmaster too when it dies.
  service.kill('SIGKILL');
  await new Promise((r) => service!.once('exit', r));
  service = start();
  service.stdout!.on('data', (d) => (output += d));
  service.stderr!.on('data', (d) => (output += d));
  for (let i = 0; (await health()) !== 200; i++) {
    if (service.exitCode !== null || i > 600) throw new Error(`service did not start again:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const joined = postmasterPid();
  process.kill(joined, 'SIGKILL');
  await throughOutage(health);
  expect(output).toMatch(/restarted it, and supervise it from now on/);
  expect(postmasterPid()).not.toBe(joined);
  expect(service.exitCode).toBeNull();
  expect((await api.get(`/campaigns/${c.id}`, key)).body.status).toBe('SENT');
  await sendArrives(api, key, 'after-second@elsewhere.test');

  console.log(`postgres restart test: /health answered ${[...statuses].join(', ')}; ${duplicates} duplicates`);
}, 400_000);
