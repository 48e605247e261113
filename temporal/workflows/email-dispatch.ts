import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const DRAIN_SECONDS = 60;
/** Rounds per run before continuing as new, so history stays bounded. */
const ROUNDS_PER_RUN = 100;

const { drainEmailQueue } = proxyActivities<Activities>({
  startToCloseTimeout: `${DRAIN_SECONDS + 60} seconds`,
  heartbeatTimeout: '30 seconds',
  // An unreachable SMTP server fails the drain; it is tried again with backoff until the server is back.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
});

/**
 * `email-dispatch:<n>`: delivers queued email for as long as the service runs. Several run side by
 * side (EMAIL_DISPATCHERS) and share the queue, so delivery scales with the worker pool.
 */
export async function emailDispatchWorkflow(input: { shard: number }): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    await drainEmailQueue({ seconds: DRAIN_SECONDS });
  }
  await continueAsNew<typeof emailDispatchWorkflow>(input);
}
