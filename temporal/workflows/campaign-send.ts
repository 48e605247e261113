import {
  CancellationScope,
  condition,
  continueAsNew,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import type { Activities } from '../activities';

/**
 * Moves a scheduled campaign's send time (null: now) and answers the time it will send at; refused
 * once sending has begun, so the caller never reports a move that did not happen.
 */
export const rescheduleUpdate = defineUpdate<{ scheduledFor: string | null }, [string | null]>('reschedule');
/** How versions before 2026-11 moved the time; kept so runs that received it replay the same. */
const legacyRescheduleSignal = defineSignal<[string | null]>('reschedule');

const { startCampaignSend, completeCampaign, cancelCampaignDelivery } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

const { deliverCampaignBatch } = proxyActivities<Activities>({
  startToCloseTimeout: '15 minutes',
  heartbeatTimeout: '20 seconds',
  // An unreachable SMTP server fails the batch; it is tried again until the server is back.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
});

/** Delivery activities (each a few batches) per run before continuing as new: history stays bounded whatever the audience size. */
const BATCHES_PER_RUN = 100;

export interface CampaignSendInput {
  campaignId: string;
  scheduledFor: string | null;
  /** Set when continuing as new: sending already started. */
  resumed?: boolean;
}

/**
 * `campaign-send:<campaignId>`: sleeps durably until `scheduledFor` (the reschedule update moves it),
 * fixes the audience, then delivers batch by batch until every recipient is accounted for, and marks
 * the campaign SENT. Cancelling the workflow (POST /campaigns/:id/cancel) stops it: a scheduled
 * campaign sends nothing, a sending one sends nothing more than what was already in flight.
 */
export async function campaignSendWorkflow(input: CampaignSendInput): Promise<void> {
  let at = input.scheduledFor;
  let sending = !!input.resumed;
  setHandler(legacyRescheduleSignal, (next) => {
    at = next;
  });
  setHandler(
    rescheduleUpdate,
    (next) => {
      at = next;
      return { scheduledFor: next };
    },
    {
      validator: (next) => {
        if (sending) throw new Error('the campaign is already being sent');
        if (next !== null && Number.isNaN(Date.parse(next))) throw new Error(`"${next}" is not a date`);
      },
    },
  );
  try {
    if (!input.resumed) {
      // Until the time that holds when the wait ends comes: a move during the wait starts it again.
      for (;;) {
        const target = at;
        const wait = target === null ? 0 : Date.parse(target) - Date.now();
        if (wait <= 0) break;
        await condition(() => at !== target, wait);
      }
      sending = true;
      const started = await startCampaignSend({ campaignId: input.campaignId });
      if (!started.proceed) return;
    }
    for (let batch = 0; ; batch++) {
      if (batch >= BATCHES_PER_RUN) await continueAsNew<typeof campaignSendWorkflow>({ ...input, resumed: true });
      const r = await deliverCampaignBatch({ campaignId: input.campaignId });
      if (r.stopped) return;
      if (r.remaining === 0) break;
      // Everything left waits for a retry after a 4xx reply.
      if (r.claimed === 0) await sleep(Math.max(1, Math.ceil(r.nextDueInSeconds ?? 5)) * 1000);
    }
    await completeCampaign({ campaignId: input.campaignId });
  } catch (err) {
    if (isCancellation(err)) await CancellationScope.nonCancellable(() => cancelCampaignDelivery({ campaignId: input.campaignId }));
    throw err;
  }
}
