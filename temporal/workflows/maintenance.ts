import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { purgeExpired } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '5 minutes' },
});

/**
 * One run of the `maintenance` schedule (every ten minutes): purges expired idempotency keys and
 * past rate-limit windows.
 */
export async function maintenancePurgeWorkflow(): Promise<void> {
  await purgeExpired();
}
