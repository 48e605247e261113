import { purgeExpiredIdempotencyKeys } from '../../src/db/idempotency-keys';
import { purgeRateLimitKeyWindows, purgeRateLimitWindows } from '../../src/db/rate-limiter';
import { purgeInboundReports } from '../../src/inbound/inbound-reports';
import { foldFeedCounts } from '../../src/modules/feed';
import { expirePendingTopics } from '../../src/modules/consent';
import { purgeInboundEmails } from '../../src/modules/inbound-emails';
import { purgeWebhookDeliveries } from '../../src/modules/webhooks-out';
import type { ActivityDeps } from './deps';

/** The periodic work of the schedules: purges and the fold of count deltas. */
export function maintenanceActivities(deps: ActivityDeps) {
  return {
    async purgeExpired(): Promise<{
      idempotencyKeys: number;
      rateLimitWindows: number;
      webhookDeliveries: number;
      inboundReports: number;
      inboundEmails: number;
      pendingTopicsExpired: number;
    }> {
      const em = deps.orm.em.fork();
      return {
        idempotencyKeys: await purgeExpiredIdempotencyKeys(em, deps.idempotencyTtlHours),
        rateLimitWindows: (await purgeRateLimitWindows(em)) + (await purgeRateLimitKeyWindows(em)),
        webhookDeliveries: await purgeWebhookDeliveries(em),
        inboundReports: await purgeInboundReports(em),
        inboundEmails: await purgeInboundEmails(em, deps.inboundEmailRetentionDays),
        // Not a purge: pending topic subscriptions past the confirmation expiry become unsubscribed (idempotent).
        pendingTopicsExpired: await expirePendingTopics(em, deps.consent.confirmationExpiryHours),
      };
    },

    /** Folds the pending count deltas (the activity-counts schedule's interval says when next); answers how many. */
    async foldActivityCounts(): Promise<{ folded: number }> {
      return { folded: await foldFeedCounts(deps.orm.em.fork()) };
    },
  };
}
