/**
 * POST /v1/send: requests/s accepted and emails/s delivered to Postfix's smtp-sink, as ratios to the
 * baseline (nodemailer alone, pooled, DKIM with a PEM key, the same message to the same sink)
 * measured in the same run, and the CPU each request cost the service and PostgreSQL (from /proc):
 * steadier than the rates on a shared machine, so the figure to compare two versions by.
 *
 *   npm run bench:send                      # 3 runs of 3,000 emails, 32 concurrent requests
 *   BENCH_RUNS=5 BENCH_EMAILS=5000 BENCH_CONNECTIONS=32 npm run bench:send
 *   BENCH_REFERENCE_NODE=off npm run bench:send   # without the baseline's run on an older Node
 *   BENCH_WARMUP=0 npm run bench:send       # time a cold service and cold baselines (default: 1,000 first)
 *   BENCH_CLIENT=node npm run bench:send    # requests from this process's HTTP client instead of wrk
 *   SMTP_POOL_SIZE=8 npm run bench:send     # the service with 8 SMTP connections (default 16; the baseline always has 8)
 *
 * When the machine has an older Node than the project's (see `referenceNode`), the baseline also runs
 * on it, as the issue measured it, and the delivered rate is printed as a ratio to that too.
 *
 * The requests come from wrk (bench/wrk-client.ts) when the machine has it (`apt-get install wrk`): a
 * client in Node costs the two shared cores about 0.2 ms a request, a tenth of the whole.
 *
 * The service runs as its own process on embedded defaults (PostgreSQL, durable Temporal dev server);
 * smtp-sink runs as its own process (bench/smtp-sink-process.ts); a DNS server publishing the sender
 * domain's records runs in this one.
 */
import {
  cpuSecondsOf,
  machine,
  median,
  medianReferenceRatio,
  postgresCpuSeconds,
  SEND_BODY,
  SERVICE_SMTP_POOL,
  sendRequest,
  startSendingBench,
} from './service-process';
import { BASELINE_CONNECTIONS, rawNodemailerRate, referenceBaseline } from './smtp-sink-process';
import { clientRequests, type LoadClient, wrkAvailable } from './wrk-client';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const EMAILS = Number(process.env.BENCH_EMAILS ?? 3000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Requests to the service, and messages through each baseline sender, before anything is timed. */
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1000);
/** The load generator: wrk (C) when installed, else this process's own HTTP client. */
const CLIENT = (process.env.BENCH_CLIENT ?? (wrkAvailable() ? 'wrk' : 'node')) as LoadClient;
const BASELINE = { body: SEND_BODY, namePrefix: 'user ', from: 'Bench <hello@bench.test>', subject: 'Weekly summary for you' };
const REFERENCE = referenceBaseline();

async function main(): Promise<void> {
  const { sink, service, agent, auth, stop } = await startSendingBench({ SMTP_POOL_SIZE: String(SERVICE_SMTP_POOL) }, CONNECTIONS);
  try {
    console.log(
      `POST /v1/send, ${EMAILS} single-recipient requests per run, ${CONNECTIONS} concurrent from ${CLIENT === 'wrk' ? 'wrk' : "Node's HTTP client"}, ` +
        `SMTP pool ${SERVICE_SMTP_POOL} (the baseline ${BASELINE_CONNECTIONS}), ` +
        `${RUNS} runs, after ${WARMUP} untimed`,
    );
    console.log(`machine: ${machine()}${REFERENCE.note}`);
    /** `n` requests, CONNECTIONS at a time, each to a new contact `<prefix>-<i>`; answers how many failed and the client's CPU. */
    const sendAll = (n: number, prefix: string) =>
      clientRequests(CLIENT, agent, { port: service.port, path: '/v1/send', headers: auth, body: sendRequest, prefix, requests: n, connections: CONNECTIONS });
    // A service runs warm: the first requests of a new process (its JIT, its connections' caches) are not timed.
    if (WARMUP) {
      const start = await sink.count();
      await sink.waitFor(start + WARMUP - (await sendAll(WARMUP, 'warmup')).failed, 600_000);
    }
    const rows: Array<{ accepted: number; delivered: number; raw: number; reference?: number; service: number; postgres: number; client: number }> = [];
    for (let run = 1; run <= RUNS; run++) {
      const baseline = { count: EMAILS, warmup: WARMUP, poolSize: BASELINE_CONNECTIONS, concurrency: BASELINE_CONNECTIONS * 4, spec: BASELINE };
      const raw = await rawNodemailerRate(sink, baseline);
      const reference = await REFERENCE.rate(sink, baseline);
      const start = await sink.count();
      const cpu0 = { service: cpuSecondsOf(service.child.pid!), postgres: postgresCpuSeconds() };
      const t0 = Date.now();
      const { failed: errors, cpuSeconds: clientSeconds } = await sendAll(EMAILS, `user${run}`);
      const acceptedSeconds = (Date.now() - t0) / 1000;
      await sink.waitFor(start + EMAILS - errors, 600_000);
      const deliveredSeconds = (Date.now() - t0) / 1000;
      // CPU per request, accepted and delivered: the service process (all its threads) and PostgreSQL.
      const cpu = {
        service: ((cpuSecondsOf(service.child.pid!) - cpu0.service) / EMAILS) * 1e3,
        postgres: ((postgresCpuSeconds() - cpu0.postgres) / EMAILS) * 1e3,
        client: (clientSeconds / EMAILS) * 1e3,
      };
      const row = { accepted: EMAILS / acceptedSeconds, delivered: (EMAILS - errors) / deliveredSeconds, raw, reference, ...cpu };
      rows.push(row);
      console.log(
        `run ${run}: accepted ${row.accepted.toFixed(0)} req/s, ` +
          `delivered ${row.delivered.toFixed(0)} emails/s (${(row.delivered / raw).toFixed(2)}x baseline), ` +
          `baseline ${raw.toFixed(0)} emails/s, ${REFERENCE.figure(row.delivered, reference)}${errors} errors; ` +
          `CPU per request: service ${cpu.service.toFixed(2)} ms, PostgreSQL ${cpu.postgres.toFixed(2)} ms, ` +
          `client (${CLIENT}) ${cpu.client.toFixed(2)} ms`,
      );
    }
    const m = {
      accepted: median(rows.map((r) => r.accepted)),
      delivered: median(rows.map((r) => r.delivered)),
      raw: median(rows.map((r) => r.raw)),
      ratio: median(rows.map((r) => r.delivered / r.raw)),
      referenceRatio: medianReferenceRatio(rows, (r) => r.delivered),
      service: median(rows.map((r) => r.service)),
      postgres: median(rows.map((r) => r.postgres)),
      client: median(rows.map((r) => r.client)),
    };
    console.log(
      `median: accepted ${m.accepted.toFixed(0)} req/s, delivered ${m.delivered.toFixed(0)} emails/s, baseline ${m.raw.toFixed(0)} emails/s, ` +
        `delivered ${m.ratio.toFixed(2)}x baseline${REFERENCE.median(m.referenceRatio)} ` +
        `(medians of the runs' ratios; goal: >= 600 req/s accepted, >= 1.2x baseline delivered); ` +
        `CPU per request: service ${m.service.toFixed(2)} ms, PostgreSQL ${m.postgres.toFixed(2)} ms, client (${CLIENT}) ${m.client.toFixed(2)} ms`,
    );
  } finally {
    await stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
