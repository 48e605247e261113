import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { dispatchLoop } from './dispatch-loop';

const { drainWebhookDeliveries } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
});

/** `webhook-dispatch:<n>`: sends webhook deliveries (and their retries, when due) for as long as the service runs. */
export async function webhookDispatchWorkflow(input: { shard: number }): Promise<void> {
  await dispatchLoop(() => drainWebhookDeliveries());
  await continueAsNew<typeof webhookDispatchWorkflow>(input);
}
