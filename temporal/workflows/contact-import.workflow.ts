import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { importContactsSlice } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/**
 * `contact-import:<jobId>`: reads the uploaded CSV a slice per activity (each slice and the position
 * reached committed together); a 5 MB file is at most a few dozen activities, so history stays short.
 */
export async function contactImportWorkflow(input: { jobId: string }): Promise<void> {
  while (!(await importContactsSlice({ jobId: input.jobId })).done);
}
