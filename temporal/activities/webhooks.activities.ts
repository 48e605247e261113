import { type ActivityDeps, drainWindow } from './deps';

export function webhookActivities(deps: ActivityDeps) {
  return {
    /** Sends due webhook deliveries until there have been none for a while. */
    async drainWebhookDeliveries() {
      return deps.webhookDispatcher.drain(drainWindow(deps));
    },
  };
}
