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
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { CampaignChunk } from '../../src/delivery';
import { campaignChunkQueue } from '../workflow-ids';

/**
 * Moves a scheduled campaign's send time (null: now) and answers the time it will send at; refused
 * once sending has begun, so the caller never reports a move that did not happen.
 */
export const rescheduleUpdate = defineUpdate<{ scheduledFor: string | null }, [string | null]>('reschedule');

/** POST /campaigns/:id/winner chose the A/B test's winner (written to the campaign's row): stop waiting for it. */
export const abWinnerChosenSignal = defineSignal('abWinnerChosen');

const { startCampaignSend, completeCampaign, cancelCampaignDelivery, holdAbTest, decideAbWinner } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

const { planCampaignChunks } = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

/** Chunk deliveries, to whichever worker has a chunk slot free (never eagerly to the worker that runs the workflow). */
const chunkActivities = () =>
  proxyActivities<Activities>({
    taskQueue: campaignChunkQueue(workflowInfo().taskQueue),
    startToCloseTimeout: '15 minutes',
    heartbeatTimeout: '20 seconds',
    // An unreachable SMTP server fails the chunk; it is tried again until the server is back.
    retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '15 seconds' },
  });

/** Chunks delivered per run before continuing as new: history stays bounded whatever the audience size. */
const CHUNKS_PER_RUN = 100;
/** Waits for mail coming due (a local-time zone's moment, a 4xx retry) per run: bounded history over hundreds of zones. */
const WAITS_PER_RUN = 20;

export interface CampaignSendInput {
  campaignId: string;
  scheduledFor: string | null;
  /** Set when continuing as new: sending already started. */
  resumed?: boolean;
  /** Set when continuing as new in the middle of a pass: the last contact id a chunk was planned up to. */
  after?: string | null;
  /** An A/B test's stage: its sample being sent (then the wait, then the winner), or the rest getting the winner. */
  ab?: { stage: 'sample' | 'rest'; waitMinutes: number };
}

/**
 * `campaign-send:<campaignId>`: sleeps durably until `scheduledFor` (the reschedule update moves it),
 * fixes the audience, then delivers it in chunks of CAMPAIGN_BATCH_SIZE recipients (by contact id), as
 * many at once as the plan allows, so that every worker polling the task queue takes a share; passes
 * again over what a 4xx sent back until every recipient is accounted for, and marks the campaign SENT.
 * Cancelling the workflow (POST /campaigns/:id/cancel) stops it: a scheduled campaign sends nothing, a
 * sending one sends nothing more than what was already in flight.
 *
 * An A/B test sends its sample first (the rest of the audience is held), waits `waitMinutes` on a
 * durable timer, has the winner decided (or waits for POST /campaigns/:id/winner), then delivers the
 * held rest with the winner. A local-time campaign's recipients come due zone by zone: the wait for the
 * next due mail is one timer per distinct moment, whatever the number of recipients.
 */
export async function campaignSendWorkflow(input: CampaignSendInput): Promise<void> {
  let at = input.scheduledFor;
  let sending = !!input.resumed;
  let ab = input.ab;
  let winnerChosen = false;
  setHandler(abWinnerChosenSignal, () => void (winnerChosen = true));
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
      if (started.abWaitMinutes) ab = { stage: 'sample', waitMinutes: started.abWaitMinutes };
    }
    const campaignId = input.campaignId;
    const { deliverCampaignChunk } = chunkActivities();
    const inFlight = new Set<Promise<void>>();
    let stopped = false;
    let failure: unknown;
    let delivered = 0;
    const launch = (chunk: CampaignChunk) => {
      const running: Promise<void> = deliverCampaignChunk({ campaignId, chunk })
        .then(
          (r) => void (stopped ||= r.stopped),
          // Kept, not thrown here: the loop rethrows it (a cancellation among them) once it looks.
          (err: unknown) => void (failure ??= err),
        )
        .finally(() => inFlight.delete(running));
      inFlight.add(running);
    };
    const settle = async () => {
      await Promise.all(inFlight);
      if (failure !== undefined) throw failure;
    };
    let after = input.after ?? null;
    let waits = 0;
    for (;;) {
      // One pass: chunk after chunk by contact id, `parallelism` of them at once.
      let plan = await planCampaignChunks({ campaignId, after });
      while (plan.chunks.length && !stopped && failure === undefined) {
        for (const chunk of plan.chunks) {
          while (inFlight.size >= plan.parallelism && failure === undefined) await Promise.race(inFlight);
          if (stopped || failure !== undefined) break;
          launch(chunk);
          delivered++;
        }
        after = plan.chunks[plan.chunks.length - 1].upTo;
        if (delivered >= CHUNKS_PER_RUN) {
          await settle();
          if (stopped) return;
          await continueAsNew<typeof campaignSendWorkflow>({ ...input, resumed: true, after, ab });
        }
        plan = await planCampaignChunks({ campaignId, after });
      }
      await settle();
      if (stopped) return;
      // The pass is over: what a 4xx sent back is due again from the first recipient on.
      after = null;
      const again = await planCampaignChunks({ campaignId, after });
      if (again.chunks.length) continue;
      if (again.remaining === 0) {
        if (ab?.stage !== 'sample') break;
        // The sample is sent (the rest is held, and not counted as remaining): wait, then the winner.
        await holdAbTest({ campaignId });
        await condition(() => winnerChosen, ab.waitMinutes * 60_000);
        for (;;) {
          // Cleared before the row is read: a choice made while it is read wakes the next wait.
          winnerChosen = false;
          const decision = await decideAbWinner({ campaignId });
          if (decision.stopped) return;
          if (decision.winner) break;
          await condition(() => winnerChosen);
        }
        ab = { ...ab, stage: 'rest' };
        continue;
      }
      if (++waits > WAITS_PER_RUN) await continueAsNew<typeof campaignSendWorkflow>({ ...input, resumed: true, after: null, ab });
      await sleep(Math.max(1, Math.ceil(again.nextDueInSeconds ?? 5)) * 1000);
    }
    await completeCampaign({ campaignId: input.campaignId });
  } catch (err) {
    if (isCancellation(err)) await CancellationScope.nonCancellable(() => cancelCampaignDelivery({ campaignId: input.campaignId }));
    throw err;
  }
}
