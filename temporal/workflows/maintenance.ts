import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { purgeExpired } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '5 minutes' },
});

const INTERVAL = '10 minutes';
/** Rounds per run before continuing as new, so history stays bounded (about 6 events a round). */
const ROUNDS_PER_RUN = 100;

/** `maintenance`: purges expired idempotency keys and past rate-limit windows every ten minutes, forever. */
export async function maintenanceWorkflow(): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    await purgeExpired();
    await sleep(INTERVAL);
  }
  await continueAsNew<typeof maintenanceWorkflow>();
}
