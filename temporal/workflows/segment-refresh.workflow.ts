import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { refreshSegment } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes' },
});

const ROUNDS_PER_RUN = 200;

/**
 * `segment:<segmentId>`: every SEGMENT_REFRESH_SECONDS refreshes the cached member count and, for a
 * tracked segment, recomputes membership against its condition, so time-based conditions stay true
 * and changes a crashed process never evaluated are caught. Ends when the segment is deleted.
 */
export async function segmentRefreshWorkflow(input: { segmentId: string }): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    const result = await refreshSegment({ segmentId: input.segmentId });
    if (!result.exists) return;
    await sleep(result.intervalSeconds * 1000);
  }
  await continueAsNew<typeof segmentRefreshWorkflow>(input);
}
