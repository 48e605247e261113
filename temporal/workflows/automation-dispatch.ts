import { continueAsNew, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const DRAIN_SECONDS = 60;
const ROUNDS_PER_RUN = 100;

const { drainAutomationOutbox } = proxyActivities<Activities>({
  startToCloseTimeout: `${DRAIN_SECONDS + 60} seconds`,
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
});

/** `automation-dispatch:<n>`: turns recorded events into execution starts and wake-ups, for as long as the service runs. */
export async function automationDispatchWorkflow(input: { shard: number }): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    await drainAutomationOutbox({ seconds: DRAIN_SECONDS });
  }
  await continueAsNew<typeof automationDispatchWorkflow>(input);
}
