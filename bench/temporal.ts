/**
 * Temporal dev server throughput, latency and memory, with the real SDK as load:
 *
 *   npm run build && node dist/bench/temporal.js                 # memory and durable, 3 runs each
 *   BENCH_MODES=memory BENCH_RUNS=5 node dist/bench/temporal.js
 *   DATABASE_URL=postgres://... node dist/bench/temporal.js      # durable mode on that database
 *
 * The dev server runs in a child process of its own (as when the service embeds it in another
 * process than the worker); the worker and the client share this one. Each run:
 *   - throughput: BENCH_WORKFLOWS workflows with one activity each, BENCH_CONCURRENCY at a time;
 *   - latency: start-to-complete of BENCH_LATENCY_SAMPLES workflows run one at a time (p50, p99);
 * and, in memory mode once, BENCH_MEMORY_WORKFLOWS completed workflows with the server's RSS and
 * heap sampled along the way, to show memory stays flat.
 */
import { fork, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker, type WorkflowBundle } from '@temporalio/worker';
import pino from 'pino';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres';
import { startDevServer } from '../temporal/devserver';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const WORKFLOWS = Number(process.env.BENCH_WORKFLOWS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 200);
const LATENCY_SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 200);
const MEMORY_WORKFLOWS = Number(process.env.BENCH_MEMORY_WORKFLOWS ?? 100_000);
const MODES = (process.env.BENCH_MODES ?? 'memory,durable').split(',') as Mode[];

type Mode = 'memory' | 'durable';

interface ServerMemory {
  rss: number;
  heapUsed: number;
  closedInMemory?: number;
}

// ------------------------------------------------------------------ the server child process

/** Child side: run the dev server, report its address and, on request, its memory. */
async function serveChild(): Promise<void> {
  const db = process.env.BENCH_SERVER_DB;
  const server = await startDevServer({
    persistence: db ? { kind: 'postgres', url: db } : { kind: 'memory' },
    log: pino({ level: 'warn' }),
  });
  process.send!({ address: server.address });
  process.on('message', (m: { type: string }) => {
    if (m.type === 'memory') {
      global.gc?.();
      const mem = process.memoryUsage();
      process.send!({ memory: { rss: mem.rss, heapUsed: mem.heapUsed } satisfies ServerMemory });
    } else if (m.type === 'stop') {
      void server.stop().then(() => process.exit(0));
    }
  });
}

class ServerProcess {
  private constructor(
    private readonly child: ChildProcess,
    readonly address: string,
  ) {}

  static start(db?: string): Promise<ServerProcess> {
    const child = fork(__filename, ['--serve'], {
      env: { ...process.env, BENCH_SERVER_DB: db ?? '' },
      // BENCH_SERVER_PROFILE=dir writes a CPU profile of the server process there.
      execArgv: ['--expose-gc', ...(process.env.BENCH_SERVER_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_SERVER_PROFILE}`] : [])],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    return new Promise((resolve, reject) => {
      child.once('message', (m: { address: string }) => resolve(new ServerProcess(child, m.address)));
      child.once('exit', (code) => reject(new Error(`dev server exited with ${code}`)));
    });
  }

  memory(): Promise<ServerMemory> {
    return new Promise((resolve) => {
      const onMessage = (m: { memory?: ServerMemory }) => {
        if (!m.memory) return;
        this.child.off('message', onMessage);
        resolve(m.memory);
      };
      this.child.on('message', onMessage);
      this.child.send({ type: 'memory' });
    });
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.send({ type: 'stop' });
    });
  }
}

// ------------------------------------------------------------------ load

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

/** Runs `total` one-activity workflows, `concurrency` at a time; returns each start-to-complete latency. */
async function drive(client: Client, taskQueue: string, total: number, concurrency: number, onProgress?: (done: number) => Promise<void>) {
  const latencies: number[] = [];
  let next = 0;
  let done = 0;
  const prefix = crypto.randomBytes(4).toString('hex');
  const loop = async () => {
    while (next < total) {
      const i = next++;
      const t0 = performance.now();
      await client.workflow.execute('echoWorkflow', { taskQueue, workflowId: `bench-${prefix}-${i}`, args: [`n${i}`] });
      latencies.push(performance.now() - t0);
      done++;
      if (onProgress && done % 10_000 === 0) await onProgress(done);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return latencies;
}

interface RunResult {
  throughput: number;
  p50: number;
  p99: number;
  loadedP50: number;
}

async function runOnce(server: ServerProcess, bundle: WorkflowBundle): Promise<RunResult> {
  const connection = await Connection.connect({ address: server.address });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const client = new Client({ connection });
  const taskQueue = `bench-${crypto.randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: { echo: async (v: string) => v },
    maxConcurrentWorkflowTaskExecutions: 200,
    maxConcurrentActivityTaskExecutions: 400,
  });
  try {
    return await worker.runUntil(async () => {
      await drive(client, taskQueue, Math.min(500, WORKFLOWS), CONCURRENCY);
      const t0 = performance.now();
      const loaded = await drive(client, taskQueue, WORKFLOWS, CONCURRENCY);
      const seconds = (performance.now() - t0) / 1000;
      const alone = (await drive(client, taskQueue, LATENCY_SAMPLES, 1)).sort((a, b) => a - b);
      return {
        throughput: WORKFLOWS / seconds,
        p50: percentile(alone, 50),
        p99: percentile(alone, 99),
        loadedP50: percentile(loaded.sort((a, b) => a - b), 50),
      };
    });
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}

async function memoryRun(bundle: WorkflowBundle): Promise<void> {
  const server = await ServerProcess.start();
  const connection = await Connection.connect({ address: server.address });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const client = new Client({ connection });
  const taskQueue = `bench-mem-${crypto.randomBytes(4).toString('hex')}`;
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: { echo: async (v: string) => v },
    maxConcurrentWorkflowTaskExecutions: 200,
    maxConcurrentActivityTaskExecutions: 400,
  });
  console.log(`\nmemory, in-memory mode: server RSS and heap (after GC) every 10,000 completed workflows`);
  const t0 = performance.now();
  try {
    await worker.runUntil(async () => {
      const start = await server.memory();
      console.log(`  ${'0'.padStart(7)} workflows: rss ${mb(start.rss)}, heap ${mb(start.heapUsed)}`);
      await drive(client, taskQueue, MEMORY_WORKFLOWS, CONCURRENCY, async (done) => {
        const m = await server.memory();
        const rate = done / ((performance.now() - t0) / 1000);
        console.log(`  ${String(done).padStart(7)} workflows: rss ${mb(m.rss)}, heap ${mb(m.heapUsed)}  (${rate.toFixed(0)} wf/s so far)`);
      });
    });
  } finally {
    await connection.close();
    await nativeConnection.close();
    await server.stop();
  }
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: { core: 'WARN', other: 'WARN' } } } });
  const root = path.resolve(__dirname, fs.existsSync(path.join(__dirname, '..', 'package.json')) ? '..' : '../..');
  // The benchmark workflow (one activity) is the conformance suite's echoWorkflow.
  const bundle = await bundleWorkflowCode({
    workflowsPath: path.join(root, 'test', 'devserver', 'fixtures', 'workflows.ts'),
    logger: new DefaultLogger('WARN'),
  });
  console.log(`Temporal dev server benchmark: ${os.cpus().length} CPUs (${os.cpus()[0]?.model}), node ${process.version}`);
  console.log(`${RUNS} runs per mode; ${WORKFLOWS} workflows at concurrency ${CONCURRENCY}; latency from ${LATENCY_SAMPLES} sequential workflows`);

  let pg: { url: string; stop(): Promise<void> } | undefined;
  for (const mode of MODES) {
    let db: string | undefined;
    if (mode === 'durable') {
      db = process.env.DATABASE_URL;
      if (!db) {
        const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-temporal-'));
        pg = await startEmbeddedPostgres({ dataDir, database: 'bench', log: pino({ level: 'warn' }) });
        db = pg.url;
      }
    }
    const results: RunResult[] = [];
    for (let run = 1; run <= RUNS; run++) {
      const server = await ServerProcess.start(db);
      const r = await runOnce(server, bundle);
      await server.stop();
      results.push(r);
      console.log(
        `${mode} run ${run}: ${r.throughput.toFixed(0)} workflows/s, p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms (p50 under load ${r.loadedP50.toFixed(0)} ms)`,
      );
    }
    console.log(
      `${mode} median of ${RUNS}: ${median(results.map((r) => r.throughput)).toFixed(0)} workflows/s, ` +
        `p50 ${median(results.map((r) => r.p50)).toFixed(1)} ms, p99 ${median(results.map((r) => r.p99)).toFixed(1)} ms`,
    );
  }
  await pg?.stop();
  if (MODES.includes('memory') && MEMORY_WORKFLOWS > 0) await memoryRun(bundle);
}

if (process.argv.includes('--serve')) {
  serveChild().catch((err) => {
    console.error(err);
    process.exit(1);
  });
} else {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
