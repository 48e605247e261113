import { condition, defineSignal, setHandler, workflowInfo } from '@temporalio/workflow';

/** Sent by a worker when work is queued while the dispatcher sleeps (and at every worker start). */
export const wakeSignal = defineSignal('wake');

/** Drains before continuing as new; signals count too, so history length is watched as well. */
const DRAINS_PER_RUN = 200;
const MAX_HISTORY = 5000;

/**
 * The body of a standing dispatcher: drain (an activity that returns once the queue has been idle
 * for a while), then sleep until signalled, until the next queued item comes due, or at most `maxSleepMs`. While it sleeps
 * no activity is in flight, so a time-skipping test server can move time past its durable timers.
 */
export async function dispatchLoop(drain: () => Promise<{ idle: boolean; nextDueInSeconds: number | null }>, maxSleepMs?: number): Promise<void> {
  let woken = false;
  setHandler(wakeSignal, () => {
    woken = true;
  });
  for (let round = 0; round < DRAINS_PER_RUN && workflowInfo().historyLength < MAX_HISTORY; round++) {
    woken = false;
    const result = await drain();
    if (!result.idle || woken || result.nextDueInSeconds === 0) continue;
    const dueMs = result.nextDueInSeconds === null ? undefined : Math.ceil(result.nextDueInSeconds * 1000);
    const sleepMs = dueMs === undefined ? maxSleepMs : maxSleepMs === undefined ? dueMs : Math.min(dueMs, maxSleepMs);
    if (sleepMs === undefined) await condition(() => woken);
    else await condition(() => woken, sleepMs);
  }
}
