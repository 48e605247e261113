/**
 * Workflows outlive the worker that started them: a new worker (with an empty cache) picks them up,
 * replays their histories and carries on.
 */
import * as workflows from './fixtures/workflows';
import { eventually, fileTestEnv, uid } from './helpers/env';

const file = fileTestEnv();

test('a restarted worker continues workflows that are waiting on signals, timers and activities', async () => {
  await file.env.startWorker();
  const start = (fn: (...args: any[]) => Promise<unknown>, args: unknown[]) =>
    file.env.client.workflow.start(fn, { taskQueue: file.env.taskQueue, workflowId: uid(fn.name), args } as never);
  const waiting = await start(workflows.waitForSignal, []);
  const timer = await start(workflows.timerAndSignal, [1500]);
  const signals = await start(workflows.collectSignals, [2]);
  for (const h of [waiting, timer, signals]) {
    await eventually(async () => expect((await h.describe()).historyLength).toBeGreaterThanOrEqual(4));
  }
  await signals.signal(workflows.unblock, 'before');
  expect(await waiting.query(workflows.stateQuery)).toBe('waiting');

  await file.env.stopWorker();
  // Meanwhile the world moves on: a signal arrives and a timer comes due with no worker around.
  await signals.signal(workflows.unblock, 'while no worker');
  await new Promise((r) => setTimeout(r, 1600));
  await file.env.startWorker({ maxCachedWorkflows: 0 });

  expect(await waiting.query(workflows.stateQuery)).toBe('waiting');
  await waiting.signal(workflows.unblock, 'new worker');
  await timer.signal(workflows.unblock, 'new worker');
  expect(await waiting.result()).toBe('unblocked by new worker');
  expect(await timer.result()).toBe('timer fired, signal new worker');
  expect(await signals.result()).toEqual(['before', 'while no worker']);
});
