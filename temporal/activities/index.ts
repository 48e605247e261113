import { accountActivities } from './accounts.activities';
import { automationActivities } from './automations.activities';
import { campaignActivities } from './campaigns.activities';
import { contactActivities } from './contacts.activities';
import type { ActivityDeps } from './deps';
import { domainActivities } from './domains.activities';
import { emailQueueActivities } from './email-queue.activities';
import { maintenanceActivities } from './maintenance.activities';
import { segmentActivities } from './segments.activities';
import { suppressionActivities } from './suppressions.activities';
import { webhookActivities } from './webhooks.activities';

export type { ActivityDeps } from './deps';

/** Thin adapters from workflows to services, one factory per domain. Each one is safe to run twice. */
export function createActivities(deps: ActivityDeps) {
  return {
    ...contactActivities(deps),
    ...suppressionActivities(deps),
    ...accountActivities(deps),
    ...domainActivities(deps),
    ...emailQueueActivities(deps),
    ...segmentActivities(deps),
    ...campaignActivities(deps),
    ...automationActivities(deps),
    ...webhookActivities(deps),
    ...maintenanceActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;

/** What the campaign-chunk queue runs. */
export function campaignChunkActivities(deps: ActivityDeps) {
  const { deliverCampaignChunk } = campaignActivities(deps);
  return { deliverCampaignChunk };
}

/** What a worker's own task queue runs: the drains of its own email dispatchers. */
export function ownActivities(deps: ActivityDeps) {
  return emailQueueActivities(deps);
}
