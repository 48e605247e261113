/**
 * Delivery as a user sees it: the service started as `npm start` starts it, on a fresh DATA_DIR, an
 * audience imported as a CSV, one campaign to it, then single-recipient /v1/send requests from Node's
 * own HTTP client on the same machine; each as a ratio to the baseline (nodemailer alone, pool 8,
 * DKIM with a PEM key) measured in the same run on the same Node. Every run is a fresh start.
 *
 *   npm run bench:user-view                        # 5 runs: 30,000 contacts, 5,000 sends, 10,000 baseline messages
 *   BENCH_RUNS=1 BENCH_RECIPIENTS=2000 BENCH_SENDS=500 BENCH_BASELINE=1000 npm run bench:user-view
 *
 * A run, with what is timed:
 * - start the service (role `all`) and smtp-sink, sign up, create a project, verify bench.test;
 * - import BENCH_RECIPIENTS contacts (`email,name`) through POST /contacts/import and poll the job until
 *   it ends (not timed; its duration is printed);
 * - the baseline: BENCH_BASELINE messages of the campaign's message through nodemailer in this process,
 *   once a run, before the campaign (its ratio serves the campaign and the sends);
 * - the campaign (ALL contacts): from the send call until the last message is at the sink and
 *   GET /campaigns/:id says SENT;
 * - BENCH_SENDS single-recipient POST /v1/send (bench:send's message), BENCH_CONNECTIONS at a time on
 *   keep-alive connections: from the first request until the last message is at the sink.
 *
 * Settings that differ from `npm start`'s defaults, and why:
 * - SMTP_URL: Postfix's smtp-sink (bench/smtp-sink-process.ts), where the mail goes and is counted;
 * - DNS_SERVERS: a DNS server in this process that publishes bench.test's records, so the sender
 *   domain verifies;
 * - RATE_LIMIT_PER_MINUTE: 100,000,000, as in the other benches: the default allows fewer requests a
 *   minute than the sends make;
 * - DATA_DIR: a new temporary directory a run (the default ./.data would be reused), PORT and
 *   TEMPORAL_DEV_SERVER_PORT: free ports (the defaults may be taken on a shared machine);
 * - the service's output goes to a file (printed, with its count of warnings and errors), not a terminal.
 * LOG_LEVEL is the service's default (info: a line a request) unless set.
 *
 * Knobs, to measure one factor at a time:
 * - BENCH_LAYOUT=all|split: one `all` process (default, as `npm start`), or an `api` process and a
 *   `worker` process joining its DATA_DIR (as bench:campaign runs);
 * - BENCH_CLIENT=node|wrk: the sends from this process's HTTP client (default) or from wrk
 *   (bench/wrk-client.ts, `apt-get install wrk`), whose CPU is printed on its own;
 * - BENCH_CONNECTIONS (32), BENCH_RECIPIENTS (30,000), BENCH_SENDS (5,000), BENCH_BASELINE (10,000),
 *   BENCH_RUNS (5);
 * - BENCH_TEMPLATE=var|liquid|alternate: the campaign's message, `{{var}}` placeholders (default), Liquid
 *   (a loop of 10 items, three conditionals), or the two on alternate runs;
 * - BENCH_WARMUP (0): sends made and delivered before the timed ones (bench:send makes 1,000);
 *   BENCH_BASELINE_WARMUP (0): messages through the baseline's sender before its timed ones;
 * - any setting of the service (SMTP_POOL_SIZE, MAIL_THREADS, LOG_LEVEL, ...) passes through from the
 *   environment; BENCH_NODE_ARGS go to the service's node (bench/service-process.ts).
 *
 * Per phase it prints CPU per email, from /proc: the service's processes (all threads), its PostgreSQL
 * (the postmaster and backends it started), this process (the client, the DNS server and the sink's
 * counter; in the baseline, nodemailer), and wrk's when it sends. The Temporal Web UI is built at
 * install (`npm ci` runs `npm run webui:build`); after an install that skipped it the service builds it
 * at start, in niced child processes: each phase prints the CPU those children used, and each run
 * whether the build was there before the start and after the run. `npm run webui:build` before the
 * bench takes that factor out.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  type BenchTemplate,
  benchTemplateOf,
  CAMPAIGN_BODY,
  campaignSent,
  childProcessCpu,
  cpuSecondsOf,
  createBenchCampaign,
  importContacts,
  type Layout,
  machine,
  median,
  mediansByTemplate,
  request,
  SEND_BODY,
  SERVICE_SMTP_POOL,
  sendRequest,
  type SendingBench,
  startSendingBench,
} from './service-process';
import { BASELINE_CONNECTIONS, rawNodemailerRate } from './smtp-sink-process';
import { clientRequests, type LoadClient } from './wrk-client';

/** A numeric knob: BENCH_<name> from the environment, else the issue's figure. */
const knob = (name: string, fallback: number) => Number(process.env[`BENCH_${name}`] ?? fallback);
const RUNS = knob('RUNS', 5);
const RECIPIENTS = knob('RECIPIENTS', 30_000);
const SENDS = knob('SENDS', 5000);
const BASELINE = knob('BASELINE', 10_000);
const CONNECTIONS = knob('CONNECTIONS', 32);
const WARMUP = knob('WARMUP', 0);
const BASELINE_WARMUP = knob('BASELINE_WARMUP', 0);
const LAYOUT = (process.env.BENCH_LAYOUT ?? 'all') as Layout;
const CLIENT = (process.env.BENCH_CLIENT ?? 'node') as LoadClient;
const LOG_LEVEL = process.env.LOG_LEVEL ?? 'info';
const GOALS = { campaign: 2.2, send: 1.2 };
/** The campaign's message through nodemailer: one baseline for both ratios (bench:send's message is the same size). */
const BASELINE_SPEC = { body: CAMPAIGN_BODY, namePrefix: 'User ', from: 'News <news@bench.test>', subject: 'News for you' };
/** The Web UI's package; a finished build leaves this stamp (packages/temporal-devserver/src/http/webui-build.ts). */
const WEBUI_STAMP = path.join(__dirname, '../../packages/temporal-devserver/webui/build/.postbox-build');

/** CPU seconds so far: the service's processes, its PostgreSQL, its other children (the Web UI build), this process. */
function cpuNow(bench: SendingBench) {
  const pids = bench.layout.processes.map((p) => p.child.pid!);
  const children = childProcessCpu(pids);
  const own = process.cpuUsage();
  return {
    service: pids.map(cpuSecondsOf),
    postgres: children.postgres,
    build: children.other,
    buildRunning: children.others,
    bench: (own.user + own.system) / 1e6,
  };
}
type Cpu = ReturnType<typeof cpuNow>;

/** A phase's CPU per email in ms, and the Web UI build's CPU seconds in it. */
function phaseCpu(before: Cpu, after: Cpu, emails: number, extra?: { name: string; seconds: number }): string {
  const perEmail = (seconds: number) => ((seconds / emails) * 1e3).toFixed(3);
  const service = after.service.map((s, i) => s - before.service[i]);
  const total = service.reduce((a, b) => a + b, 0);
  const parts = LAYOUT === 'split' ? ` (api ${perEmail(service[0])} + worker ${perEmail(service[1])})` : '';
  const build = after.build - before.build;
  const running = [...new Set([...before.buildRunning, ...after.buildRunning])];
  return (
    `CPU per email: service ${perEmail(total)} ms${parts}, PostgreSQL ${perEmail(after.postgres - before.postgres)} ms, ` +
    `bench process ${perEmail(after.bench - before.bench)} ms${extra ? `, ${extra.name} ${perEmail(extra.seconds)} ms` : ''}; ` +
    (build > 0 || running.length ? `Web UI build ran: ${build.toFixed(1)} CPU s (${running.join(', ') || 'ended'})` : 'Web UI build: none')
  );
}

function audienceCsv(n: number): string {
  const lines = ['email,name'];
  for (let i = 1; i <= n; i++) lines.push(`user${i}@example.org,User ${i}`);
  return lines.join('\n') + '\n';
}

interface Row {
  template: BenchTemplate;
  campaign: number;
  send: number;
  baseline: number;
}

async function oneRun(run: number): Promise<Row> {
  const builtBefore = fs.existsSync(WEBUI_STAMP);
  const logFile = path.join(os.tmpdir(), `postbox-user-view-${process.pid}-${run}.log`);
  const log = fs.openSync(logFile, 'w');
  const started = Date.now();
  const bench = await startSendingBench({ LOG_LEVEL }, CONNECTIONS, LAYOUT, log).catch((err: unknown) => {
    // The reason is in the service's log, not on this terminal.
    fs.closeSync(log);
    console.error(`the service did not start; the end of ${logFile}:\n${fs.readFileSync(logFile, 'utf8').split('\n').slice(-20).join('\n')}`);
    throw err;
  });
  const { sink, agent, auth } = bench;
  const port = bench.service.port;
  const lines: string[] = [];
  let finished = false;
  try {
    const ready = (Date.now() - started) / 1000;
    let cpu = cpuNow(bench);
    const t0 = Date.now();
    const { job, uploaded } = await importContacts(port, auth, audienceCsv(RECIPIENTS), 'audience.csv');
    const imported = (Date.now() - t0) / 1000;
    if (job.status !== 'COMPLETED' || job.created !== RECIPIENTS) throw new Error(`import ended ${job.status}: ${JSON.stringify(job).slice(0, 300)}`);
    let next = cpuNow(bench);
    lines.push(
      `  start: healthy after ${ready.toFixed(1)} s; ` +
        `import: ${RECIPIENTS} contacts in ${imported.toFixed(1)} s (${(RECIPIENTS / imported).toFixed(0)} rows/s, ` +
        `upload answered in ${uploaded.toFixed(2)} s); ${phaseCpu(cpu, next, RECIPIENTS)}`,
    );

    cpu = next;
    const baseline = await rawNodemailerRate(sink, {
      count: BASELINE,
      warmup: BASELINE_WARMUP,
      poolSize: BASELINE_CONNECTIONS,
      concurrency: BASELINE_CONNECTIONS * 4,
      spec: BASELINE_SPEC,
    });
    next = cpuNow(bench);
    lines.push(`  baseline: ${BASELINE} messages at ${baseline.toFixed(0)} emails/s; ${phaseCpu(cpu, next, BASELINE + BASELINE_WARMUP)}`);

    const template = benchTemplateOf(run);
    const id = await createBenchCampaign(agent, port, auth, `Bench ${run}`, template);
    let start = await sink.count();
    cpu = cpuNow(bench);
    const c0 = Date.now();
    const res = await request(agent, port, 'POST', `/campaigns/${id}/send`, {}, auth);
    if (res.status !== 200) throw new Error(`POST /campaigns/${id}/send: ${res.status} ${res.body}`);
    await sink.waitFor(start + RECIPIENTS, 3_600_000);
    const lastAtSink = (Date.now() - c0) / 1000;
    await campaignSent(agent, port, auth, id);
    const campaignSeconds = (Date.now() - c0) / 1000;
    next = cpuNow(bench);
    const campaign = RECIPIENTS / campaignSeconds;
    lines.push(
      `  campaign: last message at the sink after ${lastAtSink.toFixed(2)} s, SENT after ${campaignSeconds.toFixed(2)} s; ${phaseCpu(cpu, next, RECIPIENTS)}`,
    );

    const sendAll = (n: number, prefix: string) =>
      clientRequests(CLIENT, agent, { port, path: '/v1/send', headers: auth, body: sendRequest, prefix, requests: n, connections: CONNECTIONS });
    if (WARMUP) {
      start = await sink.count();
      await sink.waitFor(start + WARMUP - (await sendAll(WARMUP, 'warmup')).failed, 600_000);
    }
    start = await sink.count();
    cpu = cpuNow(bench);
    const s0 = Date.now();
    const { failed, cpuSeconds } = await sendAll(SENDS, `send${run}`);
    const accepted = (Date.now() - s0) / 1000;
    await sink.waitFor(start + SENDS - failed, 600_000);
    const delivered = (Date.now() - s0) / 1000;
    next = cpuNow(bench);
    const send = (SENDS - failed) / delivered;
    lines.push(
      `  send: ${SENDS} requests answered after ${accepted.toFixed(2)} s (${(SENDS / accepted).toFixed(0)} req/s), ` +
        `delivered after ${delivered.toFixed(2)} s, ` +
        `${failed} not 200; ${phaseCpu(cpu, next, SENDS - failed, CLIENT === 'wrk' ? { name: 'wrk', seconds: cpuSeconds } : undefined)}`,
    );

    console.log(
      `run ${run}: campaign ${campaign.toFixed(0)} emails/s (${(campaign / baseline).toFixed(2)}x baseline), ` +
        `/v1/send ${send.toFixed(0)} delivered/s (${(send / baseline).toFixed(2)}x baseline), baseline ${baseline.toFixed(0)} emails/s`,
    );
    for (const line of lines) console.log(line);
    finished = true;
    return { template, campaign, send, baseline };
  } finally {
    await bench.stop();
    fs.closeSync(log);
    const entries = fs
      .readFileSync(logFile, 'utf8')
      .split('\n')
      .filter((l) => l.trim());
    // pino's levels: 40 warn, 50 error, 60 fatal; a line that is not JSON counts as a problem too.
    const level = (l: string) => {
      try {
        return Number((JSON.parse(l) as { level?: number }).level ?? 0);
      } catch {
        return 50;
      }
    };
    const problems = entries.filter((l) => level(l) >= 40).length;
    // The log is kept only when there is something to read in it.
    const kept = !finished || problems > 0;
    if (!kept) fs.rmSync(logFile);
    console.log(
      `  Web UI built before the start: ${builtBefore ? 'yes' : 'no'}, after the run: ${fs.existsSync(WEBUI_STAMP) ? 'yes' : 'no'}; ` +
        `service log${kept ? ` ${logFile}` : ' (removed)'}: ${entries.length} lines, ${problems} warnings or errors`,
    );
  }
}

async function main(): Promise<void> {
  if (LAYOUT !== 'all' && LAYOUT !== 'split') throw new Error('BENCH_LAYOUT is all or split');
  if (CLIENT !== 'node' && CLIENT !== 'wrk') throw new Error('BENCH_CLIENT is node or wrk');
  console.log(
    `user view: ${LAYOUT === 'all' ? 'one `all` process' : 'an `api` and a `worker` process'}, ${RECIPIENTS} imported contacts, ` +
      `${SENDS} /v1/send at ${CONNECTIONS} concurrent from ${CLIENT === 'wrk' ? 'wrk' : "Node's HTTP client"}${WARMUP ? ` after ${WARMUP} untimed` : ''}, ` +
      `baseline ${BASELINE} messages (nodemailer, pool ${BASELINE_CONNECTIONS}), SMTP pool ${SERVICE_SMTP_POOL}, LOG_LEVEL ${LOG_LEVEL}, ${RUNS} run(s)`,
  );
  console.log(`machine: ${machine()}; /v1/send's message is ${Buffer.byteLength(SEND_BODY)} bytes of HTML, the campaign's ${Buffer.byteLength(CAMPAIGN_BODY)}`);
  const rows: Row[] = [];
  for (let run = 1; run <= RUNS; run++) rows.push(await oneRun(run));
  const ratio = { campaign: median(rows.map((r) => r.campaign / r.baseline)), send: median(rows.map((r) => r.send / r.baseline)) };
  const verdict = (value: number, goal: number) => `goal >= ${goal}x: ${value >= goal ? 'met' : 'missed'}`;
  console.log(
    `median of ${rows.length} run(s): campaign ${median(rows.map((r) => r.campaign)).toFixed(0)} emails/s, ${ratio.campaign.toFixed(2)}x baseline ` +
      `(${verdict(ratio.campaign, GOALS.campaign)}); /v1/send ${median(rows.map((r) => r.send)).toFixed(0)} delivered/s, ${ratio.send.toFixed(2)}x baseline ` +
      `(${verdict(ratio.send, GOALS.send)}); baseline ${median(rows.map((r) => r.baseline)).toFixed(0)} emails/s (ratios are medians of the runs' ratios)`,
  );
  if (new Set(rows.map((r) => r.template)).size > 1) console.log(`median campaign emails/s by template: ${mediansByTemplate(rows, (r) => r.campaign)}`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
