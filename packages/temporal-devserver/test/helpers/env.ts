/**
 * The server under test and the SDK pieces around it. By default a dev server is started in this
 * process; with TEMPORAL_ADDRESS (and optionally TEMPORAL_NAMESPACE) set, the same tests run against
 * that server instead, so the dev server and a real Temporal can be compared test for test.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime, Worker, type WorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import pino from 'pino';
import { startDevServer, type DevServerOptions } from '../../src';
import { createActivities, type AsyncCompletion } from '../fixtures/activities';

export const WORKFLOWS_PATH = path.join(__dirname, '..', 'fixtures', 'workflows.ts');

let runtimeReady = false;

/** One Temporal runtime per process; TEST_TEMPORAL_LOG=DEBUG shows the worker's core log. */
export function installRuntime(): void {
  if (runtimeReady) return;
  runtimeReady = true;
  const level = (process.env.TEST_TEMPORAL_LOG ?? 'WARN') as 'WARN';
  try {
    Runtime.install({ logger: new DefaultLogger(level), telemetryOptions: { logging: { filter: { core: level, other: level } } } });
  } catch {
    // Already installed in this process (another test file ran here first).
  }
}

export async function bundleWorkflows(): Promise<WorkflowBundle> {
  installRuntime();
  return await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: new DefaultLogger('WARN') });
}

export interface ServerUnderTest {
  address: string;
  namespace: string;
  /** True when TEMPORAL_ADDRESS points at a server we did not start. */
  external: boolean;
  stop(): Promise<void>;
}

export async function serverUnderTest(opts: DevServerOptions = {}): Promise<ServerUnderTest> {
  const external = process.env.TEMPORAL_ADDRESS;
  if (external) {
    return { address: external, namespace: process.env.TEMPORAL_NAMESPACE ?? 'default', external: true, stop: async () => {} };
  }
  const server = await startDevServer({ log: pino({ level: process.env.TEST_DEVSERVER_LOG ?? 'warn' }), ...opts });
  return { address: server.address, namespace: 'default', external: false, stop: () => server.stop() };
}

export const uid = (prefix: string) => `${prefix}-${crypto.randomBytes(5).toString('hex')}`;

/** Registers the Keyword attributes the service registers at start-up (ProjectId, CampaignId). */
export async function registerSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  try {
    await connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: { ProjectId: KEYWORD, CampaignId: KEYWORD },
    });
  } catch (err) {
    // A real server may answer "already exists" when a previous run registered them.
    if ((err as { code?: number }).code !== 6) throw err;
  }
}

/** Retries `fn` until it stops throwing (visibility is eventually consistent on real clusters). */
export async function eventually<T>(fn: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

export interface TestEnvOptions {
  server?: DevServerOptions;
  worker?: Partial<WorkerOptions>;
  bundle: WorkflowBundle;
}

/** A server, a client, and one worker (with the fixture activities) running on its own task queue. */
export class TestEnv {
  readonly asyncCompletions: AsyncCompletion[] = [];
  readonly taskQueue = uid('tq');
  private worker?: Worker;
  private workerRun?: Promise<void>;

  private constructor(
    readonly server: ServerUnderTest,
    readonly connection: Connection,
    readonly nativeConnection: NativeConnection,
    readonly client: Client,
    private readonly opts: TestEnvOptions,
  ) {}

  static async create(opts: TestEnvOptions): Promise<TestEnv> {
    installRuntime();
    const server = await serverUnderTest(opts.server);
    const connection = await Connection.connect({ address: server.address });
    const nativeConnection = await NativeConnection.connect({ address: server.address });
    const client = new Client({ connection, namespace: server.namespace });
    return new TestEnv(server, connection, nativeConnection, client, opts);
  }

  get namespace(): string {
    return this.server.namespace;
  }

  async startWorker(extra: Partial<WorkerOptions> = {}): Promise<void> {
    this.worker = await Worker.create({
      connection: this.nativeConnection,
      namespace: this.namespace,
      taskQueue: this.taskQueue,
      workflowBundle: this.opts.bundle,
      activities: createActivities({ asyncCompletions: this.asyncCompletions }),
      // A short sticky timeout keeps tests quick should a server honour stickiness.
      stickyQueueScheduleToStartTimeout: '1s',
      ...this.opts.worker,
      ...extra,
    });
    this.workerRun = this.worker.run();
  }

  async stopWorker(): Promise<void> {
    if (!this.worker) return;
    this.worker.shutdown();
    await this.workerRun;
    this.worker = undefined;
  }

  /** Every workflow run this environment's task queue saw, for replaying its histories. */
  async closedHistories(): Promise<{ workflowId: string; history: temporal.api.history.v1.IHistory }[]> {
    const out: { workflowId: string; history: temporal.api.history.v1.IHistory }[] = [];
    for await (const info of this.client.workflow.list({ query: `TaskQueue = '${this.taskQueue}' AND ExecutionStatus != 'Running'` })) {
      const handle: WorkflowHandle = this.client.workflow.getHandle(info.workflowId, info.runId);
      out.push({ workflowId: info.workflowId, history: await handle.fetchHistory() });
    }
    return out;
  }

  async teardown(): Promise<void> {
    await this.stopWorker();
    await this.connection.close();
    await this.nativeConnection.close();
    await this.server.stop();
  }
}

/** One TestEnv for a whole test file: created before its tests, torn down after them. */
export function fileTestEnv(opts: Omit<TestEnvOptions, 'bundle'> = {}): { env: TestEnv; bundle: WorkflowBundle } {
  const state = {} as { env: TestEnv; bundle: WorkflowBundle };
  beforeAll(async () => {
    state.bundle = await bundleWorkflows();
    state.env = await TestEnv.create({ ...opts, bundle: state.bundle });
  });
  afterAll(async () => {
    await state.env?.teardown();
  });
  return state;
}
