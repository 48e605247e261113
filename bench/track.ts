/**
 * Sustained POST /v1/track throughput and latency against the service on embedded defaults.
 *
 *   npm run bench:track                    # 3 runs of 15 s, 64 connections
 *   BENCH_RUNS=5 BENCH_SECONDS=20 BENCH_CONNECTIONS=64 npm run bench:track
 *
 * The service runs as its own process (`node dist/src/main.js`), with a fresh DATA_DIR, so the load
 * generator here does not share its event loop (it does share the machine's cores). Contacts are
 * drawn from a pool of 10,000 emails: the first touches insert, later ones update.
 */
import http from 'node:http';
import { createBenchProject, machine, median, percentile, request, startServiceProcess } from './service-process';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const POOL = 10_000;

interface RunResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  requests: number;
}

async function drive(port: number, publicKey: string, seconds: number): Promise<RunResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const latencies: number[] = [];
  let errors = 0;
  const end = Date.now() + seconds * 1000;
  const headers = { authorization: `Bearer ${publicKey}` };
  const worker = async () => {
    while (Date.now() < end) {
      const n = Math.floor(Math.random() * POOL);
      const body = { email: `bench${n}@example.com`, event: 'page_view', data: { page: `/p/${n % 50}`, visits: n } };
      const t0 = process.hrtime.bigint();
      try {
        const res = await request(agent, port, 'POST', '/v1/track', body, headers);
        if (res.status !== 200) errors++;
      } catch {
        errors++;
      }
      latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  const elapsed = (Date.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return { rps: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), errors, requests: latencies.length };
}

async function main(): Promise<void> {
  const service = await startServiceProcess({ RATE_LIMIT_PER_MINUTE: '100000000' }, process.env.BENCH_ROLE);
  try {
    const project = await createBenchProject(service.port);
    console.log(`POST /v1/track, ${CONNECTIONS} connections, ${RUNS} runs of ${SECONDS} s (+${WARMUP_SECONDS} s warm-up)`);
    console.log(`machine: ${machine()}`);
    await drive(service.port, project.publicKey, WARMUP_SECONDS);
    const results: RunResult[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await drive(service.port, project.publicKey, SECONDS);
      results.push(r);
      console.log(
        `run ${i + 1}: ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms, ${r.requests} requests, ${r.errors} errors`,
      );
    }
    console.log(
      `median: ${median(results.map((r) => r.rps)).toFixed(0)} req/s, p50 ${median(results.map((r) => r.p50)).toFixed(1)} ms, p99 ${median(
        results.map((r) => r.p99),
      ).toFixed(1)} ms (goal: >= 2000 req/s at p99 < 100 ms)`,
    );
  } finally {
    await service.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
