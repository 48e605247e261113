import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { foldActivityCounts } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '2 minutes' },
});

const INTERVAL = '1 minute';
/** Rounds per run before continuing as new, so history stays bounded (about 6 events a round). */
const ROUNDS_PER_RUN = 200;

/**
 * `activity-counts`: folds the count deltas that every event, email and contact write appends into the
 * hourly counts, once a minute, forever. Readers add pending deltas themselves, so this only keeps
 * them few; a stopped fold costs speed, never correctness.
 */
export async function activityCountsWorkflow(): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    await foldActivityCounts();
    await sleep(INTERVAL);
  }
  await continueAsNew<typeof activityCountsWorkflow>();
}
