/**
 * 10,000 automation executions each waiting for an event; the event is then tracked for all of them.
 * Reports the time until every execution completed, the latency from each track request to the
 * step after the wait (p50, p99), and the worker's memory: idle, with every execution waiting, at
 * its peak while they wake, and at the end (the goal is that it stays flat, not growing with the
 * number of executions).
 *
 *   npm run bench:automation                          # 10,000 contacts, 3 runs
 *   BENCH_CONTACTS=2000 BENCH_RUNS=1 BENCH_TRACK_RATE=500 npm run bench:automation
 *
 * The API (with the embedded PostgreSQL and the Temporal dev server) and the worker run as two
 * processes of the built service, so the worker's memory is its own. Events are tracked through
 * POST /v1/track at BENCH_TRACK_RATE requests per second (0: as fast as 32 connections go).
 */
import http from 'node:http';
import pg from 'pg';
import { freePort } from '../src/db/embedded-postgres';
import { createBenchProject, machine, median, memoryOf, percentile, request, startServiceProcess } from './service-process';
import { embeddedDatabaseUrl } from '../src/db/embedded-postgres';

const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 10_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const RATE = Number(process.env.BENCH_TRACK_RATE ?? 0);
const CONNECTIONS = 32;

/** Tracks `event` for every contact; answers when each request was sent (ms since epoch). */
async function trackAll(agent: http.Agent, port: number, key: string, emails: string[], event: string): Promise<Map<string, number>> {
  const sentAt = new Map<string, number>();
  const t0 = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < emails.length) {
      const i = next++;
      if (RATE > 0) {
        const due = t0 + (i * 1000) / RATE;
        if (due > Date.now()) await new Promise((r) => setTimeout(r, due - Date.now()));
      }
      sentAt.set(emails[i], Date.now());
      const res = await request(agent, port, 'POST', '/v1/track', { email: emails[i], event, data: { run: event } }, { authorization: `Bearer ${key}` });
      if (res.status !== 200) throw new Error(`track ${res.status}: ${res.body}`);
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  return sentAt;
}

async function until(probe: () => Promise<boolean>, ms = 1_800_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  const temporalPort = await freePort();
  const env = {
    RATE_LIMIT_PER_MINUTE: '100000000',
    TEMPORAL_DEV_SERVER_PORT: String(temporalPort),
    JWT_SECRET: 'bench secret shared by the api and the worker',
  };
  const api = await startServiceProcess(env, 'api');
  const worker = await startServiceProcess(env, 'worker', api.dataDir);
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(api.dataDir) });
  await db.connect();
  const rss = () => memoryOf(worker.child.pid!).rssMb;
  let peakMb = 0;
  const sampler = setInterval(() => {
    try {
      peakMb = Math.max(peakMb, rss());
    } catch {
      /* exited */
    }
  }, 100);
  try {
    const project = await createBenchProject(api.port);
    const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
    const auth = { authorization: `Bearer ${project.secretKey}` };
    const post = async (p: string, body: unknown) => {
      const res = await request(agent, api.port, 'POST', p, body, auth);
      if (res.status >= 300) throw new Error(`${p} ${res.status}: ${res.body}`);
      return JSON.parse(res.body);
    };

    console.log(`automation: ${CONTACTS} executions waiting for an event, ${RUNS} run(s), track rate ${RATE || 'unthrottled'}`);
    console.log(`machine: ${machine()}`);
    const rows: Array<{ seconds: number; p50: number; p90: number; p99: number; waitingMb: number; peakMb: number; endMb: number }> = [];
    for (let run = 1; run <= RUNS; run++) {
      // trigger `trial-<run>` → WAIT_FOR_EVENT `paid-<run>` → UPDATE_CONTACT (the step after the wait)
      const w = await post('/workflows', { name: `bench ${run}`, eventName: `trial-${run}` });
      const wait = await post(`/workflows/${w.id}/steps`, { type: 'WAIT_FOR_EVENT', name: 'paid?', config: { eventName: `paid-${run}` } });
      const after = await post(`/workflows/${w.id}/steps`, { type: 'UPDATE_CONTACT', name: 'mark paid', config: { updates: { paid: run } } });
      await post(`/workflows/${w.id}/transitions`, { fromStepId: w.steps[0].id, toStepId: wait.id });
      await post(`/workflows/${w.id}/transitions`, { fromStepId: wait.id, toStepId: after.id, outcome: 'event' });
      const enabled = await request(agent, api.port, 'PATCH', `/workflows/${w.id}`, { enabled: true }, auth);
      if (enabled.status !== 200) throw new Error(enabled.body);

      const emails = Array.from({ length: CONTACTS }, (_, i) => `run${run}-user${i}@example.org`);
      const idleMb = rss();
      const startT0 = Date.now();
      const count = async (status: string) =>
        Number((await db.query(`SELECT count(*)::int AS n FROM workflow_executions WHERE workflow_id = $1 AND status = $2`, [w.id, status])).rows[0].n);
      // The worker's memory as executions pile up (flat once its workflow cache is full).
      const growth: number[] = [];
      const allWaiting = until(async () => {
        const waiting = await count('WAITING');
        while (growth.length < 4 && waiting >= ((growth.length + 1) * CONTACTS) / 4) growth.push(rss());
        return waiting === CONTACTS;
      });
      await trackAll(agent, api.port, project.publicKey, emails, `trial-${run}`);
      await allWaiting;
      const startSeconds = (Date.now() - startT0) / 1000;
      await new Promise((r) => setTimeout(r, 2000));
      const waitingMb = rss();
      peakMb = 0;

      const t0 = Date.now();
      const sentAt = await trackAll(agent, api.port, project.publicKey, emails, `paid-${run}`);
      await until(async () => (await count('COMPLETED')) === CONTACTS);
      const seconds = (Date.now() - t0) / 1000;
      const steps = await db.query(
        `SELECT c.email, (extract(epoch FROM s.started_at) * 1000)::float8 AS at
         FROM workflow_execution_steps s JOIN workflow_executions x ON x.id = s.execution_id JOIN contacts c ON c.id = x.contact_id
         WHERE x.workflow_id = $1 AND s.step_id = $2`,
        [w.id, after.id],
      );
      if (steps.rows.length !== CONTACTS) throw new Error(`${steps.rows.length} executions reached the step after the wait`);
      const latencies = steps.rows.map((r: { email: string; at: number }) => r.at - sentAt.get(r.email)!).sort((a: number, b: number) => a - b);
      const endMb = rss();
      const row = { seconds, p50: percentile(latencies, 50), p90: percentile(latencies, 90), p99: percentile(latencies, 99), waitingMb, peakMb, endMb };
      rows.push(row);
      console.log(
        `run ${run}: ${CONTACTS} started and waiting in ${startSeconds.toFixed(1)} s; all completed ${seconds.toFixed(1)} s after the first track ` +
          `(${(CONTACTS / seconds).toFixed(0)}/s); track → step after the wait p50 ${row.p50.toFixed(0)} ms, ` +
          `p90 ${row.p90.toFixed(0)} ms, p99 ${row.p99.toFixed(0)} ms; ` +
          `worker RSS idle ${idleMb.toFixed(0)} MB, with 25/50/75/100% waiting ${growth.map((m) => m.toFixed(0)).join('/')} MB, ` +
          `after settling ${waitingMb.toFixed(0)} MB, peak during wake-ups ${peakMb.toFixed(0)} MB, end ${endMb.toFixed(0)} MB`,
      );
    }
    const m = (k: keyof (typeof rows)[number]) => median(rows.map((r) => r[k]));
    console.log(
      `median: completed in ${m('seconds').toFixed(1)} s, p50 ${m('p50').toFixed(0)} ms, p90 ${m('p90').toFixed(0)} ms, p99 ${m('p99').toFixed(0)} ms, ` +
        `worker RSS waiting ${m('waitingMb').toFixed(0)} MB, peak ${m('peakMb').toFixed(0)} MB, ` +
        `end ${m('endMb').toFixed(0)} MB (goal: p99 < 250 ms, memory flat)`,
    );
    agent.destroy();
  } finally {
    clearInterval(sampler);
    await db.end();
    await worker.stop();
    await api.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
