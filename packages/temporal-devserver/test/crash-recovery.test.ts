/**
 * Durable mode survives a crash: the dev server runs as a real child process on PostgreSQL, is
 * killed with SIGKILL while workflows wait on a timer, a signal and an activity, and is started
 * again on the same database. Nothing acknowledged before the crash may be lost, and a timer that
 * came due while the server was down fires when it is back.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { defaultPayloadConverter, defineSearchAttributeKey, SearchAttributeType, toPayloads } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { startDevServer } from '../src';
import { createActivities, type AsyncCompletion } from './fixtures/activities';
import * as workflows from './fixtures/workflows';
import { bundleWorkflows, eventually, installRuntime, registerSearchAttributes, uid } from './helpers/env';
import { createTestDatabase, freePort } from './helpers/postgres';

const BIN = path.join(__dirname, '..', 'bin', 'temporal-devserver');
const ProjectId = defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD);

function startServerProcess(port: number, db: string): ChildProcess {
  const child = spawn(process.execPath, [BIN, '--port', String(port), '--db', db, '--log-level', 'warn'], {
    env: { ...process.env, TEMPORAL_DEVSERVER_FROM_SOURCE: '1' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return child;
}

async function untilServing(address: string): Promise<void> {
  await eventually(async () => {
    const c = await Connection.connect({ address, connectTimeout: 1000 });
    try {
      await c.workflowService.getSystemInfo({});
    } finally {
      await c.close();
    }
  }, 30_000);
}

function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

let bundle: WorkflowBundle;

/** A worker of the fixtures on `taskQueue`; resolves to its stop function. */
async function startWorker(address: string, taskQueue: string): Promise<() => Promise<void>> {
  const nativeConnection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: createActivities({ asyncCompletions: [] }),
  });
  const run = worker.run();
  return async () => {
    worker.shutdown();
    await run;
    await nativeConnection.close();
  };
}
const children: ChildProcess[] = [];

/**
 * A dev server process on a fresh database and a client of it; `crash` kills it with SIGKILL, waits
 * `downMs` and starts it again on the same database.
 */
async function crashableServer(): Promise<{ address: string; connection: Connection; client: Client; crash(downMs?: number): Promise<void> }> {
  const db = await createTestDatabase();
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  children.push(startServerProcess(port, db));
  await untilServing(address);
  const connection = await Connection.connect({ address });
  return {
    address,
    connection,
    client: new Client({ connection }),
    crash: async (downMs = 0) => {
      await killHard(children[children.length - 1]);
      await new Promise((r) => setTimeout(r, downMs));
      children.push(startServerProcess(port, db));
      await untilServing(address);
    },
  };
}

beforeAll(async () => {
  installRuntime();
  bundle = await bundleWorkflows();
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) await killHard(c);
});

test('workflows waiting on a timer, a signal and an activity survive SIGKILL of the server', async () => {
  const { address, connection, client, crash } = await crashableServer();
  const nativeConnection = await NativeConnection.connect({ address });
  await registerSearchAttributes(connection, 'default');
  const taskQueue = uid('crash');
  const asyncCompletions: AsyncCompletion[] = [];
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: createActivities({ asyncCompletions }),
  });
  const run = worker.run();
  const start = (fn: (...args: any[]) => Promise<unknown>, args: unknown[], extra: object = {}) =>
    client.workflow.start(fn, { taskQueue, workflowId: uid(fn.name), args, ...extra } as never);

  try {
    const projectId = uid('project');
    const timer = await start(workflows.sleeper, [2500]);
    const signal = await start(workflows.waitForSignal, [], { typedSearchAttributes: [{ key: ProjectId, value: projectId }] });
    const signals = await start(workflows.collectSignals, [2]);
    const activity = await start(workflows.activityScenario, ['async-complete']);
    for (const h of [timer, signal, signals]) {
      await eventually(async () => expect((await h.describe()).historyLength).toBeGreaterThanOrEqual(4));
    }
    const completion = await eventually(async () => {
      const found = asyncCompletions.find((c) => c.workflowId === activity.workflowId);
      if (!found) throw new Error('activity not started yet');
      return found;
    });
    await signals.signal(workflows.unblock, 'before the crash');

    // The timer comes due while the server is down.
    await crash(3000);

    await signal.signal(workflows.unblock, 'after the crash');
    await signals.signal(workflows.unblock, 'after the crash');
    await client.activity.complete(completion.taskToken, 'completed after the crash');

    expect(await timer.result()).toBe('slept 2500');
    expect(await signal.result()).toBe('unblocked by after the crash');
    expect(await signals.result()).toEqual(['before the crash', 'after the crash']);
    expect(await activity.result()).toEqual({ result: 'completed after the crash' });
    const found: string[] = [];
    for await (const w of client.workflow.list({ query: `ProjectId = '${projectId}'` })) found.push(w.workflowId);
    expect(found).toEqual([signal.workflowId]);
  } finally {
    worker.shutdown();
    await run;
    await connection.close();
    await nativeConnection.close();
  }
}, 120_000);

test('an admitted update survives SIGKILL of the server, and a completed one keeps its outcome', async () => {
  const { address, connection, client, crash } = await crashableServer();
  const taskQueue = uid('update-crash');
  const runWorker = () => startWorker(address, taskQueue);
  try {
    const handle = await client.workflow.start(workflows.updatable, { taskQueue, workflowId: uid('updatable') });
    const completedId = uid('completed');
    let stopWorker = await runWorker();
    expect(await handle.executeUpdate(workflows.setValue, { args: ['before'], updateId: completedId })).toBe('set before');
    await stopWorker();

    // With no worker the update can only be admitted; the server says so, then dies.
    const admittedId = uid('admitted');
    const admitted = await connection.workflowService.updateWorkflowExecution({
      namespace: 'default',
      workflowExecution: { workflowId: handle.workflowId },
      waitPolicy: { lifecycleStage: temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED },
      request: {
        meta: { updateId: admittedId, identity: 'test' },
        input: { name: 'setValue', args: { payloads: toPayloads(defaultPayloadConverter, 'after') } },
      },
    });
    expect(admitted.stage).toBe(temporal.api.enums.v1.UpdateWorkflowExecutionLifecycleStage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED);
    await crash();

    stopWorker = await runWorker();
    expect(await handle.getUpdateHandle<string>(admittedId).result()).toBe('set after');
    expect(await handle.executeUpdate(workflows.setValue, { args: ['again'], updateId: completedId })).toBe('set before');
    await handle.signal(workflows.unblock, 'finish');
    expect(await handle.result()).toEqual(['before', 'after']);
    await stopWorker();
  } finally {
    await connection.close();
  }
}, 120_000);

test('schedules survive SIGKILL of the server: their state, their clock, no action taken twice', async () => {
  const { address, connection, client, crash } = await crashableServer();
  const taskQueue = uid('schedule-crash');
  const stopWorker = await startWorker(address, taskQueue);
  const action = { type: 'startWorkflow' as const, workflowType: workflows.echoWorkflow, args: ['tick'] as [string], taskQueue };
  try {
    const ticking = await client.schedule.create({
      scheduleId: uid('ticking'),
      spec: { intervals: [{ every: '1s' }] },
      action: { ...action, workflowId: uid('tick') },
    });
    const paused = await client.schedule.create({
      scheduleId: uid('paused'),
      spec: { cronExpressions: ['0 9 * * *'] },
      action: { ...action, workflowId: uid('nine') },
      state: { paused: true, note: 'kept across the crash' },
    });
    await eventually(async () => expect((await ticking.describe()).info.numActionsTaken).toBeGreaterThanOrEqual(2));

    await crash(2500);

    const before = (await ticking.describe()).info.numActionsTaken;
    const after = await eventually(async () => {
      const d = await ticking.describe();
      expect(d.info.numActionsTaken).toBeGreaterThanOrEqual(before + 2);
      return d;
    });
    expect((await paused.describe()).state).toMatchObject({ paused: true, note: 'kept across the crash' });
    await ticking.pause();
    // Every action is one workflow run, and each scheduled time started at most one.
    const runs: string[] = [];
    for await (const w of client.workflow.list({ query: `TemporalScheduledById = '${ticking.scheduleId}'` })) runs.push(w.workflowId);
    const taken = (await ticking.describe()).info.numActionsTaken;
    expect(taken).toBeGreaterThanOrEqual(after.info.numActionsTaken);
    expect(runs).toHaveLength(taken);
    expect(new Set(runs).size).toBe(runs.length);
    await ticking.delete();
    await paused.delete();
  } finally {
    await stopWorker();
    await connection.close();
  }
}, 120_000);

test('a second dev server refuses a schema another one is using', async () => {
  const db = await createTestDatabase();
  const first = await startDevServer({ persistence: { kind: 'postgres', url: db } });
  try {
    await expect(startDevServer({ persistence: { kind: 'postgres', url: db } })).rejects.toThrow(/another Temporal dev server/);
  } finally {
    await first.stop();
  }
  const again = await startDevServer({ persistence: { kind: 'postgres', url: db } });
  await again.stop();
}, 60_000);
