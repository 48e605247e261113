import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { dispatchLoop } from './dispatch-loop';

const { drainAutomationOutbox } = proxyActivities<Activities>({
  startToCloseTimeout: '3 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
});

/** `automation-dispatch:<n>`: turns recorded events into execution starts and wake-ups, for as long as the service runs. */
export async function automationDispatchWorkflow(input: { shard: number }): Promise<void> {
  await dispatchLoop(() => drainAutomationOutbox());
  await continueAsNew<typeof automationDispatchWorkflow>(input);
}
