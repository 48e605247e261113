import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { importSuppressionsSlice } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/** `suppression-import:<jobId>`: reads an uploaded CSV of addresses a slice per activity (each slice and the position reached committed together). */
export async function suppressionImportWorkflow(input: { jobId: string }): Promise<void> {
  while (!(await importSuppressionsSlice({ jobId: input.jobId })).done);
}
