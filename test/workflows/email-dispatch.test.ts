import { Context } from '@temporalio/activity';
import { workflowIds } from '../../temporal/workflow-ids';
import { emailDispatchWorkflow } from '../../temporal/workflows';
import { type DispatcherSpec, type Drain, dispatchLoopTests, runDispatcher } from './dispatch-loop';
import { eventually, scheduledAt, workflowTestEnv } from './env';

const t = workflowTestEnv();

/** The worker process's own task queue, where (and only where) its dispatchers' drains run. */
const ownQueue = (taskQueue: string) => `${taskQueue}.own`;

const drainEmailQueue = (drain: Drain) => async () => ({ sent: 0, retried: 0, failed: 0, ...(await drain()) });

// email-dispatch:<worker>:<n>: delivers queued mail; with nothing due it still looks again every 6 hours.
const spec: DispatcherSpec<Parameters<typeof emailDispatchWorkflow>> = {
  workflow: emailDispatchWorkflow,
  args: (taskQueue) => [{ shard: 2, queue: ownQueue(taskQueue) }],
  workflowId: (taskQueue) => workflowIds.emailDispatch(ownQueue(taskQueue), 2),
  // The workflow's worker has no drain: only the worker polling its own queue does.
  workers: (drain) => ({ activities: {}, more: (taskQueue) => [{ taskQueue: ownQueue(taskQueue), activities: { drainEmailQueue: drainEmailQueue(drain) } }] }),
  maxSleepMs: 6 * 3_600_000,
};

dispatchLoopTests(t, spec);

test("its drains run on its own worker's task queue, not the shared one", async () => {
  const queues: string[] = [];
  const drain = async () => {
    queues.push(Context.current().info.taskQueue);
    return { idle: true, nextDueInSeconds: null };
  };
  await runDispatcher(t.env, spec, drain, async ({ taskQueue }) => {
    await eventually(() => queues.length === 1, 'the first drain');
    expect(queues).toEqual([ownQueue(taskQueue)]);
  });
});

test('a drain that fails (SMTP unreachable) is tried again with backoff, and the dispatcher carries on', async () => {
  const attempts: Array<{ attempt: number; at: number }> = [];
  const drain = async () => {
    attempts.push({ attempt: Context.current().info.attempt, at: scheduledAt() });
    if (attempts.length <= 3) throw new Error('connect ECONNREFUSED');
    return { idle: true, nextDueInSeconds: null };
  };
  await runDispatcher(t.env, spec, drain, async ({ handle }) => {
    await eventually(() => attempts.length === 1, 'the first drain');
    // The backoff (1 s, 2 s, 4 s) passes in skipped time.
    await t.env.sleep(10_000);
    await eventually(() => attempts.length === 4, 'the drain to succeed');
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4]);
    const gaps = attempts.slice(1).map((a, i) => a.at - attempts[i].at);
    expect(gaps.map((g) => Math.round(g / 1000))).toEqual([1, 2, 4]);
    expect((await handle.describe()).status.name).toBe('RUNNING');
  });
});
