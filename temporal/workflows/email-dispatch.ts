import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { dispatchLoop } from './dispatch-loop';

const { drainEmailQueue } = proxyActivities<Activities>({
  startToCloseTimeout: '3 minutes',
  // A drain that stops heartbeating (its worker died) is retried this soon, and the retry takes its claims back.
  heartbeatTimeout: '20 seconds',
  // An unreachable SMTP server fails the drain; it is tried again with backoff until the server is back.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
});

/**
 * `email-dispatch:<n>`: delivers queued transactional email for as long as the service runs. Several
 * run side by side (EMAIL_DISPATCHERS) and share the queue, so delivery scales with the worker pool.
 */
export async function emailDispatchWorkflow(input: { shard: number }): Promise<void> {
  await dispatchLoop(() => drainEmailQueue());
  await continueAsNew<typeof emailDispatchWorkflow>(input);
}
