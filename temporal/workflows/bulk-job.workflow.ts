import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { runBulkJobChunk } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * `bulk-job:<jobId>`: subscribes, unsubscribes or deletes the job's contacts a chunk per activity,
 * each chunk and its progress committed together; at most 1,000 contacts, so history stays short.
 */
export async function bulkJobWorkflow(input: { jobId: string }): Promise<void> {
  while (!(await runBulkJobChunk({ jobId: input.jobId })).done);
}
