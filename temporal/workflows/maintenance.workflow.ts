import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { purgeExpired } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '10 seconds', maximumInterval: '5 minutes' },
});

/**
 * One run of the `maintenance` schedule (every ten minutes): purges expired idempotency keys, past
 * rate-limit windows, webhook deliveries finished 30 days ago, inbound reports taken 30 days ago and
 * received mail older than INBOUND_EMAIL_RETENTION_DAYS, and turns topic subscriptions left pending past CONFIRMATION_EXPIRY_HOURS into unsubscribed.
 */
export async function maintenancePurgeWorkflow(): Promise<void> {
  await purgeExpired();
}
