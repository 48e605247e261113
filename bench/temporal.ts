/**
 * Temporal dev server throughput, latency and memory, with the real SDK as load:
 *
 *   npm run build && node dist/bench/temporal.js                 # memory and durable, 3 runs each
 *   BENCH_MODES=memory BENCH_RUNS=5 node dist/bench/temporal.js
 *   DATABASE_URL=postgres://... node dist/bench/temporal.js      # durable mode on that database
 *
 * The dev server runs in a child process of its own; the load (client and worker) runs in this one.
 * Two kinds of worker drive it (BENCH_DRIVERS=raw,sdk):
 *   - raw: a minimal worker speaking the same RPCs as the SDK's (polls, eager activity dispatch,
 *     completions) without the SDK's workflow sandbox, so the figure is the server's capacity;
 *   - sdk: the real @temporalio/worker, whose per-workflow sandbox cost bounds it on a small machine.
 * Each run:
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
import * as grpc from '@grpc/grpc-js';
import { temporal } from '@temporalio/proto';
import pino from 'pino';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres';
import { protoRoot, startDevServer } from '@postbox/temporal-devserver';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const WORKFLOWS = Number(process.env.BENCH_WORKFLOWS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 200);
const LATENCY_SAMPLES = Number(process.env.BENCH_LATENCY_SAMPLES ?? 200);
const MEMORY_WORKFLOWS = Number(process.env.BENCH_MEMORY_WORKFLOWS ?? 100_000);
const MODES = (process.env.BENCH_MODES ?? 'memory,durable').split(',') as Mode[];
const DRIVERS = (process.env.BENCH_DRIVERS ?? 'raw,sdk').split(',') as Driver[];

type Mode = 'memory' | 'durable';
type Driver = 'raw' | 'sdk';

interface ServerMemory {
  rss: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
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
      process.send!({ memory: { rss: mem.rss, heapUsed: mem.heapUsed, heapTotal: mem.heapTotal, external: mem.external } satisfies ServerMemory });
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
type Execute = (taskQueue: string, workflowId: string, arg: string) => Promise<unknown>;

const sdkExecute =
  (client: Client): Execute =>
  (taskQueue, workflowId, arg) =>
    client.workflow.execute('echoWorkflow', { taskQueue, workflowId, args: [arg] });

async function drive(execute: Execute, taskQueue: string, total: number, concurrency: number, onProgress?: (done: number) => Promise<void>) {
  const latencies: number[] = [];
  let next = 0;
  let done = 0;
  const prefix = crypto.randomBytes(4).toString('hex');
  const loop = async () => {
    while (next < total) {
      const i = next++;
      const t0 = performance.now();
      await execute(taskQueue, `bench-${prefix}-${i}`, `n${i}`);
      latencies.push(performance.now() - t0);
      done++;
      if (onProgress && done % 10_000 === 0) await onProgress(done);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  return latencies;
}

/** Plain grpc-js calls with the SDK's protobuf types: the cheapest possible client of the server. */
class RawRpc {
  private readonly client: grpc.Client;

  constructor(address: string) {
    this.client = new grpc.Client(address, grpc.credentials.createInsecure(), { 'grpc.enable_channelz': 0 });
  }

  call<Req extends object, Res>(method: string, req: Req): Promise<Res> {
    const service = protoRoot.lookupService('temporal.api.workflowservice.v1.WorkflowService');
    const m = service.methods[method];
    const reqType = m.resolvedRequestType!;
    const resType = m.resolvedResponseType!;
    return new Promise((resolve, reject) =>
      this.client.makeUnaryRequest(
        `/temporal.api.workflowservice.v1.WorkflowService/${method}`,
        (r: Req) => Buffer.from(reqType.encode(r).finish()),
        (b: Buffer) => resType.decode(b) as unknown as Res,
        req,
        (err, res) => (err ? reject(err) : resolve(res as Res)),
      ),
    );
  }

  close(): void {
    this.client.close();
  }
}

type ws = typeof temporal.api.workflowservice.v1;
type Msg<K extends keyof ws> = ws[K] extends { decode(...a: never[]): infer R } ? R : never;

/**
 * The smallest worker that runs the benchmark workflow (schedule `echo`, then complete with its
 * result) over the same RPCs the SDK uses, eager activity dispatch included.
 */
class RawWorker {
  private running = true;
  private readonly loops: Promise<void>[] = [];
  private readonly rpc: RawRpc;

  constructor(
    address: string,
    private readonly taskQueue: string,
  ) {
    this.rpc = new RawRpc(address);
  }

  start(workflowPollers = 32, activityPollers = 8): void {
    for (let i = 0; i < workflowPollers; i++) this.loops.push(this.workflowLoop());
    for (let i = 0; i < activityPollers; i++) this.loops.push(this.activityLoop());
  }

  private async workflowLoop(): Promise<void> {
    const CT = temporal.api.enums.v1.CommandType;
    while (this.running) {
      const task = await this.rpc
        .call<object, Msg<'PollWorkflowTaskQueueResponse'>>('PollWorkflowTaskQueue', {
          namespace: 'default',
          taskQueue: { name: this.taskQueue },
          identity: 'raw',
        })
        .catch(() => undefined);
      if (!task?.taskToken?.length) continue;
      const events = task.history?.events ?? [];
      const completed = events.find((e) => e.activityTaskCompletedEventAttributes)?.activityTaskCompletedEventAttributes;
      const input = events[0].workflowExecutionStartedEventAttributes?.input;
      const commands = completed
        ? [{ commandType: CT.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION, completeWorkflowExecutionCommandAttributes: { result: completed.result } }]
        : [
            {
              commandType: CT.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
              scheduleActivityTaskCommandAttributes: {
                activityId: '1',
                activityType: { name: 'echo' },
                taskQueue: { name: this.taskQueue },
                input,
                startToCloseTimeout: { seconds: 10 },
                requestEagerExecution: true,
              },
            },
          ];
      const res = await this.rpc
        .call<object, Msg<'RespondWorkflowTaskCompletedResponse'>>('RespondWorkflowTaskCompleted', {
          namespace: 'default',
          taskToken: task.taskToken,
          commands,
          identity: 'raw',
        })
        .catch(() => undefined);
      for (const act of res?.activityTasks ?? []) await this.completeActivity(act);
    }
  }

  private async completeActivity(act: temporal.api.workflowservice.v1.IPollActivityTaskQueueResponse): Promise<void> {
    await this.rpc.call('RespondActivityTaskCompleted', { namespace: 'default', taskToken: act.taskToken, result: act.input, identity: 'raw' }).catch(() => {});
  }

  private async activityLoop(): Promise<void> {
    while (this.running) {
      const act = await this.rpc
        .call<object, Msg<'PollActivityTaskQueueResponse'>>('PollActivityTaskQueue', {
          namespace: 'default',
          taskQueue: { name: this.taskQueue },
          identity: 'raw',
        })
        .catch(() => undefined);
      if (act?.taskToken?.length) await this.completeActivity(act);
    }
  }

  stop(): void {
    this.running = false;
    this.rpc.close();
  }
}

/** Starts a workflow and long-polls its close event, exactly as Client.workflow.execute does. */
class RawStarter {
  private readonly rpc: RawRpc;

  constructor(address: string) {
    this.rpc = new RawRpc(address);
  }

  async execute(taskQueue: string, workflowId: string, arg: string): Promise<void> {
    const input = { payloads: [{ metadata: { encoding: Buffer.from('json/plain') }, data: Buffer.from(JSON.stringify(arg)) }] };
    await this.rpc.call('StartWorkflowExecution', {
      namespace: 'default',
      workflowId,
      workflowType: { name: 'echoWorkflow' },
      taskQueue: { name: taskQueue },
      input,
      identity: 'raw',
      requestId: crypto.randomUUID(),
    });
    let nextPageToken: Uint8Array | undefined;
    for (;;) {
      const res = await this.rpc.call<object, Msg<'GetWorkflowExecutionHistoryResponse'>>('GetWorkflowExecutionHistory', {
        namespace: 'default',
        execution: { workflowId },
        waitNewEvent: true,
        historyEventFilterType: temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
        nextPageToken,
      });
      if (res.history?.events?.length) return;
      nextPageToken = res.nextPageToken;
    }
  }

  close(): void {
    this.rpc.close();
  }
}

interface RunResult {
  throughput: number;
  p50: number;
  p99: number;
  loadedP50: number;
}

async function measure(execute: Execute, taskQueue: string): Promise<RunResult> {
  await drive(execute, taskQueue, Math.min(500, WORKFLOWS), CONCURRENCY);
  const t0 = performance.now();
  const loaded = await drive(execute, taskQueue, WORKFLOWS, CONCURRENCY);
  const seconds = (performance.now() - t0) / 1000;
  const alone = (await drive(execute, taskQueue, LATENCY_SAMPLES, 1)).sort((a, b) => a - b);
  return {
    throughput: WORKFLOWS / seconds,
    p50: percentile(alone, 50),
    p99: percentile(alone, 99),
    loadedP50: percentile(
      loaded.sort((a, b) => a - b),
      50,
    ),
  };
}

async function runOnce(server: ServerProcess, bundle: WorkflowBundle, driver: Driver): Promise<RunResult> {
  const taskQueue = `bench-${crypto.randomBytes(4).toString('hex')}`;
  if (driver === 'raw') {
    const raw = new RawWorker(server.address, taskQueue);
    const starter = new RawStarter(server.address);
    raw.start();
    try {
      return await measure((q, id, arg) => starter.execute(q, id, arg), taskQueue);
    } finally {
      raw.stop();
      starter.close();
    }
  }
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: { echo: async (v: string) => v },
    maxConcurrentWorkflowTaskExecutions: 200,
    maxConcurrentActivityTaskExecutions: 400,
  });
  try {
    return await worker.runUntil(() => measure(sdkExecute(client), taskQueue));
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}

async function memoryRun(): Promise<void> {
  const server = await ServerProcess.start();
  const taskQueue = `bench-mem-${crypto.randomBytes(4).toString('hex')}`;
  const raw = new RawWorker(server.address, taskQueue);
  const starter = new RawStarter(server.address);
  raw.start();
  console.log(`\nmemory, in-memory mode (raw worker): server RSS and heap after GC every 10,000 completed workflows`);
  const t0 = performance.now();
  try {
    const start = await server.memory();
    console.log(
      `  ${'0'.padStart(7)} workflows: rss ${mb(start.rss)}, heap used ${mb(start.heapUsed)} of ${mb(start.heapTotal)}, external ${mb(start.external)}`,
    );
    await drive(
      (q, id, arg) => starter.execute(q, id, arg),
      taskQueue,
      MEMORY_WORKFLOWS,
      CONCURRENCY,
      async (done) => {
        const m = await server.memory();
        const rate = done / ((performance.now() - t0) / 1000);
        console.log(
          `  ${String(done).padStart(7)} workflows: rss ${mb(m.rss)}, heap used ${mb(m.heapUsed)} of ${mb(m.heapTotal)}, ` +
            `external ${mb(m.external)}  (${rate.toFixed(0)} wf/s so far)`,
        );
      },
    );
  } finally {
    raw.stop();
    starter.close();
    await server.stop();
  }
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN'), telemetryOptions: { logging: { filter: { core: 'WARN', other: 'WARN' } } } });
  const root = path.resolve(__dirname, fs.existsSync(path.join(__dirname, '..', 'package.json')) ? '..' : '../..');
  // The benchmark workflow (one activity) is the dev server's conformance suite's echoWorkflow.
  const bundle = await bundleWorkflowCode({
    workflowsPath: path.join(root, 'packages', 'temporal-devserver', 'test', 'fixtures', 'workflows.ts'),
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
    for (const driver of DRIVERS) {
      const results: RunResult[] = [];
      for (let run = 1; run <= RUNS; run++) {
        const server = await ServerProcess.start(db);
        const r = await runOnce(server, bundle, driver);
        await server.stop();
        results.push(r);
        console.log(
          `${mode}/${driver} run ${run}: ${r.throughput.toFixed(0)} workflows/s, p50 ${r.p50.toFixed(1)} ms, ` +
            `p99 ${r.p99.toFixed(1)} ms (p50 under load ${r.loadedP50.toFixed(0)} ms)`,
        );
      }
      if (!results.length) continue;
      console.log(
        `== ${mode}/${driver} median of ${RUNS}: ${median(results.map((r) => r.throughput)).toFixed(0)} workflows/s, ` +
          `p50 ${median(results.map((r) => r.p50)).toFixed(1)} ms, p99 ${median(results.map((r) => r.p99)).toFixed(1)} ms`,
      );
    }
  }
  await pg?.stop();
  if (MODES.includes('memory') && MEMORY_WORKFLOWS > 0) await memoryRun();
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
