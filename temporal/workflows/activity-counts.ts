import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { foldActivityCounts } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '2 minutes' },
});

/** Rounds per run before continuing as new, so history stays bounded (about 6 events a round). */
const ROUNDS_PER_RUN = 200;

/**
 * `activity-counts`: folds the count deltas that every event and email write appends into the hourly
 * and daily counts, every ACTIVITY_FOLD_SECONDS (a minute by default), forever. Readers add pending
 * deltas themselves, so this only keeps them few; a stopped fold costs speed, never correctness.
 */
export async function activityCountsWorkflow(): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    const { nextInSeconds } = await foldActivityCounts();
    await sleep(nextInSeconds * 1000);
  }
  await continueAsNew<typeof activityCountsWorkflow>();
}
