/**
 * Sustained POST /v1/track throughput and latency against the service on embedded defaults.
 *
 *   npm run bench:track                    # 3 runs of 15 s, 64 connections
 *   BENCH_RUNS=5 BENCH_SECONDS=20 BENCH_CONNECTIONS=64 npm run bench:track
 *
 * The service runs as its own process (`node dist/src/main.js`), with a fresh DATA_DIR, so the load
 * generator here does not share its event loop. Contacts are drawn from a pool of 10,000 emails:
 * the first touches insert, later ones update.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../src/db/embedded-postgres';

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

function request(agent: http.Agent, port: number, method: string, p: string, body?: unknown, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method,
        path: p,
        headers: { ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }));
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

async function waitHealthy(port: number, child: ChildProcess): Promise<void> {
  const agent = new http.Agent();
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error('service exited during start-up');
    const ok = await request(agent, port, 'GET', '/health').then((r) => r.status === 200, () => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('service did not become healthy');
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

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
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-bench-'));
  const port = await freePort();
  const child = spawn(process.execPath, [...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : []), path.join(__dirname, '../src/main.js'), ...(process.env.BENCH_ROLE ? [process.env.BENCH_ROLE] : [])], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      RATE_LIMIT_PER_MINUTE: '100000000',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  try {
    await waitHealthy(port, child);
    const agent = new http.Agent({ keepAlive: true });
    const signup = await request(agent, port, 'POST', '/auth/signup', { email: 'bench@example.com', password: 'bench password' });
    const cookie = String(signup.headers['set-cookie']?.[0] ?? '').split(';')[0];
    const project = JSON.parse((await request(agent, port, 'POST', '/users/@me/projects', { name: 'bench' }, { cookie })).body);

    console.log(`POST /v1/track, ${CONNECTIONS} connections, ${RUNS} runs of ${SECONDS} s (+${WARMUP_SECONDS} s warm-up)`);
    console.log(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`);
    await drive(port, project.publicKey, WARMUP_SECONDS);
    const results: RunResult[] = [];
    for (let i = 0; i < RUNS; i++) {
      const r = await drive(port, project.publicKey, SECONDS);
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
    await new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
    });
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
