/**
 * A 100,000-recipient campaign delivered to Postfix's smtp-sink: emails/s end to end (send request to
 * last message received) as a ratio to the baseline (nodemailer alone, pooled, DKIM with a PEM key,
 * the same message to the same sink) measured in the same run, the worker process's peak memory, and
 * the campaign workflow's history length.
 *
 *   npm run bench:campaign                       # 100,000 recipients, 1 run
 *   BENCH_RECIPIENTS=20000 BENCH_RUNS=3 npm run bench:campaign
 *   BENCH_REFERENCE_NODE=off npm run bench:campaign   # without the baseline's run on an older Node
 *   SMTP_POOL_SIZE=8 npm run bench:campaign      # the service with 8 SMTP connections (default 16; the baseline always has 8)
 *   BENCH_SUPPRESSED=10 BENCH_SUPPRESSION_RULES=20 npm run bench:campaign
 *                                                # 10% of the audience on the suppression list and 20 rules (of every kind,
 *                                                # matching no one): the audience's anti-join and each chunk's check
 *   BENCH_AB=1 npm run bench:campaign            # an A/B test (two variants, half the audience in the sample, the winner
 *                                                # chosen as soon as the sample is sent): the rate over its sends, the wait left out
 *
 * Also prints the CPU per email of the worker (all its threads) and of PostgreSQL, from /proc, and,
 * when the machine has an older Node (see `referenceNode`), the ratio to the baseline run on it.
 *
 * The API and the worker run as two processes of the built service (the worker joins the API's
 * embedded PostgreSQL and Temporal dev server), so the worker's memory is its own.
 */
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import {
  CAMPAIGN_BODY,
  campaignSent,
  cpuSecondsOf,
  createBenchCampaign,
  machine,
  median,
  medianReferenceRatio,
  memoryOf,
  postgresCpuSeconds,
  request,
  SERVICE_SMTP_POOL,
  insertBenchAudience,
  type SendingBench,
  startSendingBench,
} from './service-process';
import { embeddedDatabaseUrl } from '../src/db/embedded-postgres';
import { BASELINE_CONNECTIONS, rawNodemailerRate, referenceBaseline } from './smtp-sink-process';

const RECIPIENTS = Number(process.env.BENCH_RECIPIENTS ?? 100_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 1);
/** Percent of the audience on the suppression list, and how many rules the project has. */
const SUPPRESSED_PERCENT = Number(process.env.BENCH_SUPPRESSED ?? 0);
const SUPPRESSION_RULES = Number(process.env.BENCH_SUPPRESSION_RULES ?? 0);
/** An A/B test whose winner is chosen by hand as soon as its sample is sent, so no wait is timed. */
const AB_TEST =
  process.env.BENCH_AB === '1'
    ? { variants: [{ subject: 'A: news for {{name}}' }, { subject: 'B: news for {{name}}' }], testPercent: 50, waitMinutes: 1, winnerCriteria: 'manual' }
    : undefined;
/** Who gets the campaign: the audience less the suppressed addresses (the rules match no one). */
const DELIVERED = RECIPIENTS - Math.floor((RECIPIENTS * SUPPRESSED_PERCENT) / 100);
const RULE_KINDS = [
  ['ADDRESS', (i: number) => `blocked${i}@example.net`],
  ['DOMAIN', (i: number) => `blocked${i}.example.net`],
  ['PREFIX', (i: number) => `noreply${i}`],
  ['SUFFIX', (i: number) => `+blocked${i}`],
  ['WILDCARD', (i: number) => `bot${i}?*@*.example.net`],
] as const;

/** The suppressed share of the bench audience (`insertBenchAudience`'s addresses), and the rules, through the API. */
async function suppressPart(db: pg.Client, bench: SendingBench): Promise<void> {
  const count = RECIPIENTS - DELIVERED;
  if (count > 0) {
    await db.query(
      `INSERT INTO suppressions (project_id, email, reason, detail)
       SELECT $1, 'user' || i || '@example.org', 'MANUAL', 'bench' FROM generate_series(1, $2) AS i`,
      [bench.project.id, count],
    );
    await db.query('ANALYZE suppressions');
  }
  for (let i = 0; i < SUPPRESSION_RULES; i++) {
    const [kind, pattern] = RULE_KINDS[i % RULE_KINDS.length];
    const res = await request(bench.agent, bench.layout.api.port, 'POST', '/suppressions/rules', { name: `bench ${i}`, kind, pattern: pattern(i) }, bench.auth);
    if (res.status !== 201) throw new Error(`POST /suppressions/rules: ${res.status} ${res.body}`);
  }
}
const BASELINE = { body: CAMPAIGN_BODY, namePrefix: 'User ', from: 'News <news@bench.test>', subject: 'News for you' };
const REFERENCE = referenceBaseline();

async function main(): Promise<void> {
  const bench = await startSendingBench({ SMTP_POOL_SIZE: String(SERVICE_SMTP_POOL) }, 1, 'split');
  const { sink, project, agent, auth } = bench;
  const { api, worker } = bench.layout;
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(api.dataDir) });
  await db.connect();
  const connection = await Connection.connect({ address: bench.layout.temporalAddress });
  const temporal = new Client({ connection });
  let peakMb = 0;
  const sampler = setInterval(() => {
    try {
      peakMb = Math.max(peakMb, memoryOf(worker.child.pid!).rssMb);
    } catch {
      /* exited */
    }
  }, 250);
  try {
    await insertBenchAudience(db, project.id, RECIPIENTS);
    await suppressPart(db, bench);

    console.log(`campaign to ${RECIPIENTS} recipients, SMTP pool ${SERVICE_SMTP_POOL} (the baseline ${BASELINE_CONNECTIONS}), ${RUNS} run(s)`);
    if (DELIVERED < RECIPIENTS || SUPPRESSION_RULES) {
      console.log(`suppressed: ${RECIPIENTS - DELIVERED} of them listed, ${SUPPRESSION_RULES} rules; rates count the ${DELIVERED} emails sent`);
    }
    if (AB_TEST) console.log(`A/B test: ${AB_TEST.testPercent}% of the audience in the sample, the winner chosen as soon as it is sent`);
    console.log(`machine: ${machine()}${REFERENCE.note}`);
    const rows: Array<{ rate: number; raw: number; reference?: number; history: number; worker: number; postgres: number }> = [];
    for (let run = 1; run <= RUNS; run++) {
      const baseline = { count: Math.min(RECIPIENTS, 20_000), poolSize: BASELINE_CONNECTIONS, concurrency: 16, spec: BASELINE };
      const raw = await rawNodemailerRate(sink, baseline);
      const reference = await REFERENCE.rate(sink, baseline);
      const c = { id: await createBenchCampaign(agent, api.port, auth, `Bench ${run}`, AB_TEST ? { abTest: AB_TEST } : {}) };
      const start = await sink.count();
      const cpu0 = { worker: cpuSecondsOf(worker.child.pid!), postgres: postgresCpuSeconds() };
      const t0 = Date.now();
      let waited = 0;
      const res = await request(agent, api.port, 'POST', `/campaigns/${c.id}/send`, {}, auth);
      if (res.status !== 200) throw new Error(res.body);
      if (AB_TEST) {
        // The sample, then the winner at once: the time between (the campaign turning TESTING) is not counted.
        await sink.waitFor(start + Math.round((DELIVERED * AB_TEST.testPercent) / 100), 3_600_000);
        const sampled = Date.now();
        await campaignTesting(agent, api.port, auth, c.id);
        const chose = await request(agent, api.port, 'POST', `/campaigns/${c.id}/winner`, { variantId: 'A' }, auth);
        if (chose.status !== 200) throw new Error(chose.body);
        waited = Date.now() - sampled;
      }
      await sink.waitFor(start + DELIVERED, 3_600_000);
      const rate = DELIVERED / ((Date.now() - t0 - waited) / 1000);
      // CPU per email, from the send call to the last message at the sink: the worker (all its threads) and PostgreSQL.
      const cpu = {
        worker: ((cpuSecondsOf(worker.child.pid!) - cpu0.worker) / DELIVERED) * 1e3,
        postgres: ((postgresCpuSeconds() - cpu0.postgres) / DELIVERED) * 1e3,
      };
      await campaignSent(agent, api.port, auth, c.id);
      const description = await temporal.workflow.getHandle(`campaign-send:${c.id}`).describe();
      const history = description.historyLength;
      rows.push({ rate, raw, reference, history, ...cpu });
      console.log(
        `run ${run}: ${rate.toFixed(0)} emails/s end to end, baseline ${raw.toFixed(0)} emails/s (${(rate / raw).toFixed(2)}x baseline), ` +
          REFERENCE.figure(rate, reference) +
          `worker peak RSS ${peakMb.toFixed(0)} MB, last workflow run's history ${history} events; ` +
          `CPU per email: worker ${cpu.worker.toFixed(3)} ms, PostgreSQL ${cpu.postgres.toFixed(3)} ms`,
      );
    }
    const m = { rate: median(rows.map((r) => r.rate)), raw: median(rows.map((r) => r.raw)), ratio: median(rows.map((r) => r.rate / r.raw)) };
    console.log(
      `median: ${m.rate.toFixed(0)} emails/s, baseline ${m.raw.toFixed(0)} emails/s, ${m.ratio.toFixed(2)}x baseline` +
        `${REFERENCE.median(medianReferenceRatio(rows, (r) => r.rate))} (medians of the runs' ratios), ` +
        `worker peak RSS ${peakMb.toFixed(0)} MB (goal: >= 2.2x baseline, worker < 400 MB); ` +
        `CPU per email: worker ${median(rows.map((r) => r.worker)).toFixed(3)} ms, PostgreSQL ${median(rows.map((r) => r.postgres)).toFixed(3)} ms`,
    );
  } finally {
    clearInterval(sampler);
    await connection.close();
    await db.end();
    await bench.stop();
  }
}

/** Polls `GET /campaigns/:id` until the A/B test's sample is sent (TESTING). */
async function campaignTesting(agent: Parameters<typeof request>[0], port: number, auth: Record<string, string>, id: string): Promise<void> {
  for (;;) {
    const res = await request(agent, port, 'GET', `/campaigns/${id}`, undefined, auth);
    if (JSON.parse(res.body).status === 'TESTING') return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
