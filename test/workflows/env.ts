/**
 * Each service workflow alone: the real workflow code, bundled once per test file, run by a worker
 * whose activities are mocks, against the repo's dev server in its time-skipping test mode (as
 * @temporalio/testing launches Temporal's own test server), so durable timers pass in no time.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { Context } from '@temporalio/activity';
import type { WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker, type WorkflowBundle } from '@temporalio/worker';
import type { Activities } from '../../temporal/activities';

/** The time-skipping test server launcher, `temporal-devserver-test <port>`. The only place it is named. */
export const TEST_SERVER = path.join(__dirname, '..', '..', 'packages', 'temporal-devserver', 'bin', 'temporal-devserver-test');

export const WORKFLOWS_PATH = require.resolve('../../temporal/workflows');

/** What a test gives a worker: just the activities the workflow under test calls. */
export type MockActivities = Partial<Activities>;

export const uid = (prefix: string) => `${prefix}-${crypto.randomBytes(5).toString('hex')}`;

// Activities failing on purpose are logged at WARN: quiet unless TEST_TEMPORAL_LOG asks for them.
const level = (process.env.TEST_TEMPORAL_LOG ?? 'ERROR') as 'ERROR';

function installRuntime(): void {
  try {
    Runtime.install({ logger: new DefaultLogger(level), telemetryOptions: { logging: { filter: { core: level, other: level } } } });
  } catch {
    // Already installed in this process.
  }
}

let bundle: Promise<WorkflowBundle> | undefined;

/** The service's workflows (temporal/workflows/index.ts), bundled at most once per test file. */
export function workflowBundle(): Promise<WorkflowBundle> {
  bundle ??= bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: new DefaultLogger('WARN') });
  return bundle;
}

/** A time-skipping environment for the whole test file, created before its tests and torn down after. */
export function workflowTestEnv(): { env: TestWorkflowEnvironment } {
  const state = {} as { env: TestWorkflowEnvironment };
  beforeAll(async () => {
    installRuntime();
    // The launched server runs from the TypeScript sources, so tests never see a stale build.
    process.env.TEMPORAL_DEVSERVER_FROM_SOURCE = '1';
    const [env] = await Promise.all([
      TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER } } }),
      workflowBundle(),
    ]);
    state.env = env;
  });
  afterAll(async () => {
    await state.env?.teardown();
  });
  return state;
}

export interface QueueActivities {
  taskQueue: string;
  activities: MockActivities;
}

/**
 * Runs `fn` with a worker on a fresh task queue (its mocked activities `activities`) and one more
 * worker per entry of `more` (another queue the workflow sends activities to). When `fn` ends, every
 * execution still running on the task queue is terminated: a leftover would otherwise hold its
 * timers (and, with no worker left, its tasks would stop time from skipping for the next test).
 */
export async function withWorkers<T>(
  env: TestWorkflowEnvironment,
  activities: MockActivities,
  fn: (taskQueue: string) => Promise<T>,
  more: (taskQueue: string) => QueueActivities[] = () => [],
): Promise<T> {
  const taskQueue = uid('wf');
  const bundled = await workflowBundle();
  const workers = [
    await Worker.create({ connection: env.nativeConnection, taskQueue, workflowBundle: bundled, activities }),
    ...(await Promise.all(more(taskQueue).map((q) => Worker.create({ connection: env.nativeConnection, taskQueue: q.taskQueue, activities: q.activities })))),
  ];
  const run = async (): Promise<T> => {
    try {
      return await fn(taskQueue);
    } finally {
      await terminateRunning(env, taskQueue);
    }
  };
  return await workers.reduce<() => Promise<T>>((inner, worker) => () => worker.runUntil(inner()), run)();
}

async function terminateRunning(env: TestWorkflowEnvironment, taskQueue: string): Promise<void> {
  for await (const info of env.client.workflow.list({ query: `TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Running'` })) {
    await env.client.workflow
      .getHandle(info.workflowId)
      .terminate('test over')
      .catch(() => undefined);
  }
}

/** Polls `probe` (real time) until it answers true; the workflow's own clock is not involved. */
export async function eventually(probe: () => boolean | Promise<boolean>, what = 'condition', ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The server's clock when the running activity attempt was scheduled: when, in workflow time, it ran. */
export const scheduledAt = () => Context.current().info.currentAttemptScheduledTimestampMs;

/**
 * A mocked activity that answers `answers` in order (the last one again and again), throwing an Error
 * answer, and records in `at` when (workflow time) each call ran.
 */
export function scripted<A extends unknown[], R>(answers: Array<R | Error>): { at: number[]; activity: jest.Mock<Promise<R>, A> } {
  const at: number[] = [];
  const activity = jest.fn(async (..._args: A): Promise<R> => {
    at.push(scheduledAt());
    const answer = answers[Math.min(at.length - 1, answers.length - 1)];
    if (answer instanceof Error) throw answer;
    return answer;
  });
  return { at, activity };
}

/** The gaps between the times in `at`, in whole seconds. */
export const gapsInSeconds = (at: number[]) => at.slice(1).map((x, i) => Math.round((x - at[i]) / 1000));

/** A promise with its resolve, to hold a mocked activity until the test lets it go. */
export function gate<T = void>(): { promise: Promise<T>; open: (v: T) => void } {
  let open!: (v: T) => void;
  const promise = new Promise<T>((r) => (open = r));
  return { promise, open };
}

export type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

/** Every run of a workflow id, first to last, following continue-as-new. */
export async function runsOf(handle: WorkflowHandleWithFirstExecutionRunId): Promise<Array<{ runId: string; events: HistoryEvent[] }>> {
  const runs: Array<{ runId: string; events: HistoryEvent[] }> = [];
  let runId: string | undefined = handle.firstExecutionRunId;
  while (runId) {
    const events: HistoryEvent[] = (await handle.client.getHandle(handle.workflowId, runId).fetchHistory()).events ?? [];
    runs.push({ runId, events });
    runId = events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId ?? undefined;
  }
  return runs;
}

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;
