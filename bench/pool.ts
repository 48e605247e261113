/**
 * Delivery with a pool of workers: one API process and N worker processes (N = 1, 2, 3 by default) on
 * the API's embedded PostgreSQL and Temporal dev server, delivering to Postfix's smtp-sink. For each N:
 * a 30,000-recipient campaign (send call to SENT), then 5,000 single-recipient `/v1/send` at 32
 * concurrent (first request to the last message at the sink); each worker's share, read from its own
 * `postbox_email_deliveries_total` (METRICS_PORT), the total rate, and duplicates (messages the sink
 * counted beyond the emails recorded SENT).
 *
 *   npm run bench:pool
 *   BENCH_WORKERS=3 BENCH_RECIPIENTS=10000 BENCH_SENDS=2000 npm run bench:pool
 *
 * On two cores every process shares the same CPUs, so the total rate is not expected to grow with N;
 * the shares show that each worker takes its part, which is what adds capacity on more machines.
 */
import http from 'node:http';
import pg from 'pg';
import { embeddedDatabaseUrl, freePort } from '../src/db/embedded-postgres';
import { ZoneDnsServer } from '../src/dns/zone-server';
import {
  createBenchProject,
  machine,
  request,
  sendRequest,
  type ServiceProcess,
  insertBenchAudience,
  startServiceProcess,
  verifiedBenchDomain,
} from './service-process';
import { startSinkProcess } from './smtp-sink-process';

const WORKER_COUNTS = (process.env.BENCH_WORKERS ?? '1,2,3').split(',').map(Number);
const RECIPIENTS = Number(process.env.BENCH_RECIPIENTS ?? 30_000);
const SENDS = Number(process.env.BENCH_SENDS ?? 5000);
const CONCURRENCY = 32;

/** Messages SMTP accepted from this worker so far (its own counter on METRICS_PORT). */
async function sentBy(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return Number(/^postbox_email_deliveries_total\{outcome="sent"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

async function measure(n: number) {
  const dns = await new ZoneDnsServer().start();
  const sink = await startSinkProcess();
  const temporalPort = await freePort();
  const env = {
    SMTP_URL: sink.url,
    DNS_SERVERS: dns.address,
    RATE_LIMIT_PER_MINUTE: '100000000',
    TEMPORAL_DEV_SERVER_PORT: String(temporalPort),
    JWT_SECRET: 'bench secret shared by the api and the workers',
  };
  const api = await startServiceProcess(env, 'api');
  const workers: Array<{ process: ServiceProcess; metricsPort: number }> = [];
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(api.dataDir) });
  try {
    for (let i = 0; i < n; i++) {
      const metricsPort = await freePort();
      workers.push({ process: await startServiceProcess({ ...env, METRICS_PORT: String(metricsPort) }, 'worker', api.dataDir), metricsPort });
    }
    await db.connect();
    const project = await createBenchProject(api.port);
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
    const auth = { authorization: `Bearer ${project.secretKey}` };
    await verifiedBenchDomain(agent, api.port, auth, dns);
    await insertBenchAudience(db, project.id, RECIPIENTS);
    const shares = () => Promise.all(workers.map((w) => sentBy(w.metricsPort)));

    // The campaign.
    let before = await shares();
    let atSink = await sink.count();
    const atStart = atSink;
    const c = JSON.parse(
      (
        await request(
          agent,
          api.port,
          'POST',
          '/campaigns',
          { name: 'Pool', subject: 'News for {{name}}', body: '<p>Hello {{name}}</p>', from: 'news@bench.test', audienceType: 'ALL' },
          auth,
        )
      ).body,
    ).data;
    const t0 = Date.now();
    await request(agent, api.port, 'POST', `/campaigns/${c.id}/send`, {}, auth);
    await sink.waitFor(atSink + RECIPIENTS, 3_600_000);
    for (;;) {
      if (JSON.parse((await request(agent, api.port, 'GET', `/campaigns/${c.id}`, undefined, auth)).body).status === 'SENT') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const campaignRate = RECIPIENTS / ((Date.now() - t0) / 1000);
    const campaignShares = (await shares()).map((s, i) => s - before[i]);

    // Transactional sends.
    before = await shares();
    atSink = await sink.count();
    let next = 0;
    const t1 = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < SENDS) {
          const i = next++;
          const res = await request(agent, api.port, 'POST', '/v1/send', sendRequest(`send${i}@example.org`, i), auth);
          if (res.status !== 200) throw new Error(`send answered ${res.status}: ${res.body}`);
        }
      }),
    );
    await sink.waitFor(atSink + SENDS, 600_000);
    const sendRate = SENDS / ((Date.now() - t1) / 1000);
    const sendShares = (await shares()).map((s, i) => s - before[i]);
    agent.destroy();

    // Every email recorded SENT once; what the sink counted beyond them since the campaign began came twice.
    const [{ sent }] = (await db.query(`SELECT count(*)::int AS sent FROM emails WHERE status = 'SENT' AND to_email LIKE '%@example.org'`)).rows;
    return { campaignRate, campaignShares, sendRate, sendShares, duplicates: (await sink.count()) - atStart - sent };
  } finally {
    await db.end().catch(() => undefined);
    for (const w of workers) await w.process.stop();
    await api.stop();
    await sink.stop();
    await dns.stop();
  }
}

const percent = (part: number, whole: number) => `${((100 * part) / whole).toFixed(0)}%`;

async function main(): Promise<void> {
  console.log(`bench:pool — one API and N workers; a ${RECIPIENTS}-recipient campaign, then ${SENDS} /v1/send at ${CONCURRENCY} concurrent; ${machine()}`);
  for (const n of WORKER_COUNTS) {
    const r = await measure(n);
    console.log(
      `${n} worker(s): campaign ${r.campaignRate.toFixed(0)} emails/s, shares ${r.campaignShares.map((s) => percent(s, RECIPIENTS)).join(' / ')}; ` +
        `/v1/send ${r.sendRate.toFixed(0)} delivered/s, shares ${r.sendShares.map((s) => percent(s, SENDS)).join(' / ')}; duplicates ${r.duplicates}`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
