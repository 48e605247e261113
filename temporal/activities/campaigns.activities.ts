import { Context } from '@temporalio/activity';
import type { CampaignChunk } from '../../src/delivery';
import { cancelCampaignDelivery, completeCampaign, decideAbWinner, holdAbTest, startCampaignSend } from '../../src/modules/campaigns';
import type { ActivityDeps } from './deps';

export function campaignActivities(deps: ActivityDeps) {
  return {
    /** Fixes a campaign's audience as sending starts (idempotent). */
    async startCampaignSend(input: { campaignId: string }) {
      return startCampaignSend(deps.orm.em.fork(), input.campaignId);
    },

    /**
     * The next chunks of a campaign to deliver (after `after`), and how many may be in flight: every
     * worker polling for chunks now, times the chunks each takes at once. With no chunk left, what is
     * still queued (retries after a 4xx) and when it comes due.
     */
    async planCampaignChunks(input: { campaignId: string; after: string | null }) {
      const parallelism = deps.campaignChunksPerWorker * (await deps.workersPolling().catch(() => 1));
      const chunks = await deps.dispatcher.campaignChunks(input.campaignId, input.after, deps.campaignBatchSize, parallelism);
      const left = chunks.length ? { remaining: null, nextDueInSeconds: null } : await deps.dispatcher.campaignLeft(input.campaignId);
      return { chunks, parallelism, ...left };
    },

    /** One chunk of a campaign (`planCampaignChunks`), delivered while the campaign still sends (CampaignStops). */
    async deliverCampaignChunk(input: { campaignId: string; chunk: CampaignChunk }) {
      const ctx = Context.current();
      return deps.campaignStops.deliverWhileSending(deps.orm.em, input.campaignId, ctx.cancellationSignal, (signal) =>
        deps.dispatcher.deliverCampaignChunk(input.campaignId, input.chunk, { heartbeat: () => ctx.heartbeat(), signal }),
      );
    },

    async completeCampaign(input: { campaignId: string }) {
      return completeCampaign(deps.orm.em.fork(), input.campaignId);
    },

    async cancelCampaignDelivery(input: { campaignId: string }) {
      return cancelCampaignDelivery(deps.orm.em.fork(), input.campaignId);
    },

    /** An A/B test's sample is sent: TESTING until the winner is decided. */
    async holdAbTest(input: { campaignId: string }) {
      return holdAbTest(deps.orm.em.fork(), input.campaignId);
    },

    /** An A/B test's winner (chosen, or by its criterion), and the rest of the audience released with it (idempotent). */
    async decideAbWinner(input: { campaignId: string }) {
      return decideAbWinner(deps.orm.em.fork(), input.campaignId);
    },
  };
}
