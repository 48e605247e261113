/**
 * Webhooks out: events recorded at BENCH_EVENT_RATE per second (inserted straight into `events`, as
 * the API's writes do, each statement a commit) for BENCH_SECONDS, fanned out to one endpoint on a
 * loopback receiver. Reports the latency from each event's commit to its arrival (p50, p99) and the
 * delivered rate, then the same with a second, dead endpoint (accepts connections, never answers)
 * subscribed to the same events: a dead endpoint must cost the live one nothing. The baseline, in
 * the same run, is the ceiling of the receiver alone: this process POSTing the same bodies to it.
 *
 *   npm run bench:webhooks                       # 1,000 events/s for 10 s, 3 runs
 *   BENCH_EVENT_RATE=2000 BENCH_SECONDS=5 BENCH_RUNS=1 npm run bench:webhooks
 *
 * The receiver runs in this process, so its cost shares the two cores with the service.
 */
import http from 'node:http';
import net from 'node:net';
import pg from 'pg';
import { embeddedDatabaseUrl } from '../src/db/embedded-postgres';
import { createBenchProject, machine, median, percentile, request, startServiceProcess } from './service-process';

const RATE = Number(process.env.BENCH_EVENT_RATE ?? 1000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** Events per INSERT statement: RATE / 20 per 50 ms tick. */
const TICK_MS = 50;

interface Arrival {
  event: string;
  latencyMs: number;
}

function startReceiver(onArrival: (a: Arrival) => void): Promise<http.Server> {
  const server = http.createServer({ keepAlive: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const now = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { type: string; timestamp: string; data: { run?: string } };
      onArrival({ event: body.type, latencyMs: now - Date.parse(body.timestamp) });
      res.statusCode = 204;
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** A receiver that takes connections and requests and never answers. */
function startDeadReceiver(): Promise<net.Server> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('data', () => {});
    s.on('close', () => sockets.delete(s));
  });
  server.on('close', () => sockets.forEach((s) => s.destroy()));
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const portOf = (s: net.Server) => (s.address() as net.AddressInfo).port;

/** The receiver's own ceiling: `n` POSTs of a delivery-sized body, 16 at a time, over keep-alive. */
async function receiverCeiling(port: number, n: number): Promise<number> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const body = { type: 'baseline', timestamp: new Date().toISOString(), data: { contact: { id: 'x', email: 'x@example.org' }, run: 'baseline' } };
  const t0 = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next++ < n) await request(agent, port, 'POST', '/baseline', body);
    }),
  );
  agent.destroy();
  return n / ((Date.now() - t0) / 1000);
}

async function main(): Promise<void> {
  const arrivals: Arrival[] = [];
  const receiver = await startReceiver((a) => arrivals.push(a));
  const dead = await startDeadReceiver();
  const svc = await startServiceProcess({ RATE_LIMIT_PER_MINUTE: '100000000', WEBHOOK_ALLOW_PRIVATE: 'true' });
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(svc.dataDir) });
  await db.connect();
  try {
    const project = await createBenchProject(svc.port);
    const agent = new http.Agent({ keepAlive: true });
    const auth = { authorization: `Bearer ${project.secretKey}` };
    const post = async (p: string, body: unknown) => {
      const res = await request(agent, svc.port, 'POST', p, body, auth);
      if (res.status >= 300) throw new Error(`${p} ${res.status}: ${res.body}`);
      return JSON.parse(res.body);
    };
    const contact = await post('/contacts', { email: 'subscriber@example.org' });
    const live = await post('/webhook-endpoints', { url: `http://127.0.0.1:${portOf(receiver)}/live`, events: ['bench.*'] });

    console.log(`webhooks: ${RATE} events/s for ${SECONDS} s to one endpoint, ${RUNS} run(s); then with a dead endpoint beside it`);
    console.log(`machine: ${machine()}`);
    const results: Array<{ phase: string; ceiling: number; rate: number; p50: number; p99: number; max: number }> = [];
    for (let run = 1; run <= RUNS; run++) {
      for (const phase of ['alone', 'with a dead endpoint'] as const) {
        const deadEndpoint =
          phase === 'alone' ? undefined : await post('/webhook-endpoints', { url: `http://127.0.0.1:${portOf(dead)}/dead`, events: ['bench.*'] });
        const ceiling = await receiverCeiling(portOf(receiver), 5000);
        arrivals.length = 0;
        const name = `bench.run${run}.${phase === 'alone' ? 'alone' : 'dead'}`;
        const total = RATE * SECONDS;
        const perTick = Math.max(1, Math.round((RATE * TICK_MS) / 1000));
        const t0 = Date.now();
        for (let sent = 0, tick = 0; sent < total; tick++) {
          const due = t0 + tick * TICK_MS;
          const wait = due - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          const n = Math.min(perTick, total - sent);
          await db.query(
            `INSERT INTO events (id, project_id, contact_id, name, data) SELECT gen_random_uuid(), $1, $2, $3, jsonb_build_object('i', g) ` +
              `FROM generate_series(1, $4) g`,
            [project.id, contact.contact?.id ?? contact.id, name, n],
          );
          sent += n;
        }
        const deadline = Date.now() + 120_000;
        while (arrivals.filter((a) => a.event === name).length < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        const mine = arrivals.filter((a) => a.event === name);
        const seconds = (Date.now() - t0) / 1000;
        const lat = mine.map((a) => a.latencyMs).sort((a, b) => a - b);
        const row = { phase, ceiling, rate: mine.length / seconds, p50: percentile(lat, 50), p99: percentile(lat, 99), max: lat[lat.length - 1] };
        results.push(row);
        console.log(
          `run ${run}, ${phase}: ${mine.length}/${total} delivered, ${row.rate.toFixed(0)}/s, ` +
            `commit→receiver p50 ${row.p50} ms, p99 ${row.p99} ms, max ${row.max} ms; ` +
            `receiver ceiling ${ceiling.toFixed(0)}/s`,
        );
        if (deadEndpoint) {
          await request(agent, svc.port, 'DELETE', `/webhook-endpoints/${deadEndpoint.id}`, undefined, auth);
        }
      }
    }
    for (const phase of ['alone', 'with a dead endpoint']) {
      const rows = results.filter((r) => r.phase === phase);
      console.log(
        `median ${phase}: ${median(rows.map((r) => r.rate)).toFixed(0)} delivered/s ` +
          `(${(median(rows.map((r) => r.rate / r.ceiling)) * 100).toFixed(0)}% of the receiver's ceiling ` +
          `${median(rows.map((r) => r.ceiling)).toFixed(0)}/s), ` +
          `p50 ${median(rows.map((r) => r.p50))} ms, p99 ${median(rows.map((r) => r.p99))} ms`,
      );
    }
    agent.destroy();
    await request(new http.Agent(), svc.port, 'DELETE', `/webhook-endpoints/${live.id}`, undefined, auth);
  } finally {
    await db.end();
    await svc.stop();
    receiver.close();
    dead.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
