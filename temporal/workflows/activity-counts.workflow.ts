import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { foldActivityCounts } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '2 minutes' },
});

/**
 * One run of the `activity-counts` schedule (every ACTIVITY_FOLD_SECONDS, a minute by default): folds
 * the count deltas that every event and email write appends into the hourly and daily counts, and
 * answers how many it folded. Readers add pending deltas themselves, so this only keeps them few; a
 * skipped fold costs speed, never correctness.
 */
export async function activityCountsFoldWorkflow(): Promise<number> {
  const { folded } = await foldActivityCounts();
  return folded;
}
