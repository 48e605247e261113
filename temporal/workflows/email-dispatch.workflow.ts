import { ActivityFailure, continueAsNew, proxyActivities, TimeoutFailure } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { dispatchLoop } from './dispatch-loop';

export interface EmailDispatchInput {
  shard: number;
  /** The task queue of the worker process this dispatcher belongs to: its drains run there, and only there. */
  queue: string;
}

/**
 * A dispatcher whose worker died while it slept wakes this often to find out (its drain is then never
 * started, and it ends): rarely, since each look is a drain of a worker that may well be alive.
 */
const LOOK_AGAIN_MS = 6 * 3_600_000;

const workerGone = (err: unknown) => err instanceof ActivityFailure && err.cause instanceof TimeoutFailure && err.cause.timeoutType === 'SCHEDULE_TO_START';

/**
 * `email-dispatch:<worker>:<n>`: delivers queued transactional email for as long as its worker process
 * runs. Every worker starts its own (EMAIL_DISPATCHERS of them) and their drains run on that worker's
 * own task queue, so every worker in the pool takes a share of the shared queue (claims with SKIP
 * LOCKED) and the mail its own requests hand over in memory. A worker that stops cancels its
 * dispatchers; one that died leaves them asleep until a drain finds no one to run it, and they end.
 */
export async function emailDispatchWorkflow(input: EmailDispatchInput): Promise<void> {
  const { drainEmailQueue } = proxyActivities<Activities>({
    taskQueue: input.queue,
    startToCloseTimeout: '3 minutes',
    // A drain that stops heartbeating (its worker died) is retried this soon on the same worker's queue.
    heartbeatTimeout: '20 seconds',
    // Nobody polls a dead worker's queue: past this, the drain fails for good (never retried) and the dispatcher ends.
    scheduleToStartTimeout: '5 minutes',
    // An unreachable SMTP server fails the drain; it is tried again with backoff until the server is back.
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
  });
  try {
    await dispatchLoop(() => drainEmailQueue(), LOOK_AGAIN_MS);
  } catch (err) {
    if (workerGone(err)) return;
    throw err;
  }
  await continueAsNew<typeof emailDispatchWorkflow>(input);
}
