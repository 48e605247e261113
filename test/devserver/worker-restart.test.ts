/**
 * Workflows outlive the worker that started them: a new worker (with an empty cache) picks them up,
 * replays their histories and carries on.
 */
import type { WorkflowBundle } from '@temporalio/worker';
import * as workflows from './fixtures/workflows';
import { bundleWorkflows, eventually, TestEnv, uid } from './helpers/env';

let bundle: WorkflowBundle;
let env: TestEnv;

beforeAll(async () => {
  bundle = await bundleWorkflows();
  env = await TestEnv.create({ bundle });
});

afterAll(async () => {
  await env?.teardown();
});

test('a restarted worker continues workflows that are waiting on signals, timers and activities', async () => {
  await env.startWorker();
  const start = (fn: (...args: any[]) => Promise<unknown>, args: unknown[]) => // eslint-disable-line @typescript-eslint/no-explicit-any
    env.client.workflow.start(fn, { taskQueue: env.taskQueue, workflowId: uid(fn.name), args } as never);
  const waiting = await start(workflows.waitForSignal, []);
  const timer = await start(workflows.timerAndSignal, [1500]);
  const signals = await start(workflows.collectSignals, [2]);
  for (const h of [waiting, timer, signals]) {
    await eventually(async () => expect((await h.describe()).historyLength).toBeGreaterThanOrEqual(4));
  }
  await signals.signal(workflows.unblock, 'before');
  expect(await waiting.query(workflows.stateQuery)).toBe('waiting');

  await env.stopWorker();
  // Meanwhile the world moves on: a signal arrives and a timer comes due with no worker around.
  await signals.signal(workflows.unblock, 'while no worker');
  await new Promise((r) => setTimeout(r, 1600));
  await env.startWorker({ maxCachedWorkflows: 0 });

  expect(await waiting.query(workflows.stateQuery)).toBe('waiting');
  await waiting.signal(workflows.unblock, 'new worker');
  await timer.signal(workflows.unblock, 'new worker');
  expect(await waiting.result()).toBe('unblocked by new worker');
  expect(await timer.result()).toBe('timer fired, signal new worker');
  expect(await signals.result()).toEqual(['before', 'while no worker']);
});
