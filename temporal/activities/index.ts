import type { MikroORM } from '@mikro-orm/postgresql';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { purgeExpiredIdempotencyKeys } from '../../src/db/idempotency-keys';
import { purgeRateLimitKeyWindows, purgeRateLimitWindows } from '../../src/db/rate-limiter';
import { type ConsentDeps, expirePendingTopics, requestConfirmation } from '../../src/modules/consent';
import { foldActivityCounts } from '../../src/modules/activity';
import type { Resolver } from '../../src/dns/resolver';
import { runBulkJobChunk } from '../../src/modules/contacts';
import { importNextSlice } from '../../src/modules/contacts';
import { endSnooze } from '../../src/modules/contacts';
import { importNextSuppressionSlice } from '../../src/modules/suppressions';
import type { ReturnPathDns } from '../../src/modules/domains';
import { checkDomain } from '../../src/modules/domains';
import type { CampaignChunk, DeliveryEngine } from '../../src/delivery';
import type { Mailer } from '../../src/mail/transport';
import { type AccountEmail, sendAccountEmail } from '../../src/modules/accounts';
import type { AutomationDispatcher } from '../../src/modules/automations';
import type { WebhookDispatcher } from '../../src/modules/webhooks-out';
import { purgeWebhookDeliveries } from '../../src/modules/webhooks-out';
import type { AutomationRuntime, WaitEnd } from '../../src/modules/automations';
import type { ActivityHub } from '../../src/bus/contact-activity';
import { computeMembership, refreshCount, SegmentSchema } from '../../src/modules/segments';
import { purgeInboundReports } from '../../src/inbound/inbound-reports';
import { purgeInboundEmails } from '../../src/modules/inbound-emails';
import {
  CampaignSchema,
  type CampaignStops,
  cancelCampaignDelivery,
  completeCampaign,
  decideAbWinner,
  holdAbTest,
  startCampaignSend,
} from '../../src/modules/campaigns';

export interface ActivityDeps {
  orm: MikroORM;
  log: Logger;
  resolver: Resolver;
  dispatcher: DeliveryEngine;
  /** Verification and password-reset mail: the transport, the base of links, the sender. */
  accountMail: { mailer: Mailer; publicUrl: string; from: string };
  hub: ActivityHub;
  idempotencyTtlHours: number;
  /** INBOUND_EMAIL_RETENTION_DAYS: received mail older than this is purged. */
  inboundEmailRetentionDays: number;
  /** Double opt-in: confirmation mail for imports that ask for it, and the expiry of pending subscriptions. */
  consent: ConsentDeps;
  domainCheckIntervalSeconds: number;
  /** The return-path records every sender domain is checked for. */
  returnPath: ReturnPathDns;
  segmentRefreshSeconds: number;
  campaignBatchSize: number;
  /** CAMPAIGN_CHUNKS_PER_WORKER: campaign chunks each worker delivers at once. */
  campaignChunksPerWorker: number;
  /** How many worker processes poll for campaign chunks now (Temporal's own list of pollers). */
  workersPolling: () => Promise<number>;
  /** A cancel's notification to this process's chunks of that campaign. */
  campaignStops: CampaignStops;
  automation: AutomationRuntime;
  automationDispatcher: AutomationDispatcher;
  webhookDispatcher: WebhookDispatcher;
  /** How long a dispatcher's drain waits for more work before its execution goes to sleep. */
  dispatchIdleSeconds: number;
}

/** A standing drain runs at most this long before handing back to its workflow (which starts the next). */
const DRAIN_MAX_MS = 120_000;
/** How often a campaign chunk reads whether its campaign still sends: a cancel whose notification was lost stops it within this. */
const CAMPAIGN_WATCH_MS = 500;

function drainWindow(deps: ActivityDeps) {
  const ctx = Context.current();
  return { idleMs: deps.dispatchIdleSeconds * 1000, maxMs: DRAIN_MAX_MS, heartbeat: () => ctx.heartbeat(), signal: ctx.cancellationSignal };
}

/** Thin adapters from workflows to services. Each one is safe to run twice. */
export function createActivities(deps: ActivityDeps) {
  /**
   * Double opt-in mail for the joins a committed chunk left pending. A retry goes on with the next chunk,
   * so each pending join is mailed at most once (one whose mail failed stays pending and expires).
   */
  const mailConfirmations = async (projectId: string | undefined, pending: Map<string, string[]>, source: 'import' | 'bulk') => {
    for (const [contactId, topicIds] of pending) {
      await requestConfirmation(deps.orm.em.fork(), deps.consent, {
        projectId: projectId!,
        contactId,
        topicIds,
        subscribeAll: false,
        source,
        origin: { ip: null, userAgent: null },
      });
    }
  };
  return {
    /** Resubscribes the contact if it still carries exactly this snooze; otherwise does nothing. */
    async endContactSnooze(input: { contactId: string; until: string }): Promise<{ resubscribed: boolean }> {
      const ended = await endSnooze(deps.orm.em.fork(), input.contactId, new Date(input.until));
      if (ended) deps.hub.publish({ projectId: ended.projectId, contactIds: [input.contactId], events: ended.events });
      return { resubscribed: !!ended?.events.length };
    },

    /** One chunk of a bulk job; what changed is told to live segments and automations. */
    async runBulkJobChunk(input: { jobId: string }): Promise<{ done: boolean }> {
      const r = await runBulkJobChunk(deps.orm.em.fork(), input.jobId);
      if (r.projectId) deps.hub.publish({ projectId: r.projectId, contactIds: r.contactIds, events: r.events });
      await mailConfirmations(r.projectId, r.pending, 'bulk');
      return { done: r.done };
    },

    /** The next slice of a CSV import; the contacts it wrote, and the topics they joined, are told to live segments and automations. */
    async importContactsSlice(input: { jobId: string }): Promise<{ done: boolean }> {
      const r = await importNextSlice(deps.orm.em.fork(), input.jobId);
      if (r.projectId && r.contactIds.length) deps.hub.publish({ projectId: r.projectId, contactIds: r.contactIds, events: r.events });
      await mailConfirmations(r.projectId, r.pending, 'import');
      return { done: r.done };
    },

    /** The next slice of a CSV of addresses to suppress. */
    async importSuppressionsSlice(input: { jobId: string }): Promise<{ done: boolean }> {
      return importNextSuppressionSlice(deps.orm.em.fork(), input.jobId);
    },

    /** A verification or password-reset mail with a fresh token, or an invitation; fails (to be retried) until SMTP accepts it. */
    async sendAccountEmail(input: AccountEmail): Promise<{ sent: boolean }> {
      return sendAccountEmail(deps.orm.em.fork(), deps.accountMail, input);
    },

    /** Checks a sender domain's DNS records and stores the outcome; `exists: false` once it was deleted. */
    async checkDomain(input: { domainId: string }): Promise<{ exists: boolean; status?: string; intervalSeconds: number }> {
      const row = await checkDomain(deps.orm.em.fork(), deps.resolver, input.domainId, deps.returnPath);
      return { exists: !!row, status: row?.status, intervalSeconds: deps.domainCheckIntervalSeconds };
    },

    /** Delivers queued email until the queue has been idle a while; fails (to be retried) while SMTP is unreachable. */
    async drainEmailQueue() {
      const { info } = Context.current();
      return deps.dispatcher.drain({ ...drainWindow(deps), owner: info.workflowExecution?.workflowId ?? info.activityId });
    },

    /** Recomputes a tracked segment's membership (with its events) or refreshes a segment's count. */
    async refreshSegment(input: { segmentId: string }): Promise<{ exists: boolean; intervalSeconds: number }> {
      const em = deps.orm.em.fork();
      const computed = await computeMembership(em, input.segmentId);
      if (!computed) return { exists: false, intervalSeconds: deps.segmentRefreshSeconds };
      const segment = await em.findOne(SegmentSchema, input.segmentId, { fields: ['projectId', 'trackMembership', 'type'], refresh: true });
      if (!segment) return { exists: false, intervalSeconds: deps.segmentRefreshSeconds };
      if (!(segment.type === 'DYNAMIC' && segment.trackMembership)) await refreshCount(em, input.segmentId);
      if (computed.events.length) deps.hub.publish({ projectId: segment.projectId, contactIds: [], events: computed.events });
      return { exists: true, intervalSeconds: deps.segmentRefreshSeconds };
    },

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

    /** One chunk of a campaign (`planCampaignChunks`); stopped when the campaign no longer sends. */
    async deliverCampaignChunk(input: { campaignId: string; chunk: CampaignChunk }) {
      const ctx = Context.current();
      const sending = async () => (await deps.orm.em.fork().findOne(CampaignSchema, input.campaignId, { fields: ['status'] }))?.status === 'SENDING';
      // A cancel reaches a running activity only in a heartbeat's answer, which the SDK throttles to most of
      // the heartbeat timeout. The cancel's notification stops every chunk in flight at its commit, and the
      // campaign's own row, read now and then, does if that notification was lost.
      const notified = deps.campaignStops.watch(input.campaignId);
      const cancelled = new AbortController();
      const watch = setInterval(
        () =>
          void sending().then(
            (still) => still || cancelled.abort(),
            () => {},
          ),
        CAMPAIGN_WATCH_MS,
      );
      try {
        if (!(await sending())) return { stopped: true, claimed: 0, sent: 0, retried: 0, failed: 0 };
        const r = await deps.dispatcher.deliverCampaignChunk(input.campaignId, input.chunk, {
          heartbeat: () => ctx.heartbeat(),
          signal: AbortSignal.any([ctx.cancellationSignal, cancelled.signal, notified.signal]),
        });
        return { stopped: cancelled.signal.aborted || notified.signal.aborted, ...r };
      } finally {
        clearInterval(watch);
        notified.release();
      }
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

    async automationLoad(input: { executionId: string; recordTrigger: boolean }) {
      return deps.automation.load(input.executionId, input.recordTrigger);
    },

    async automationRunStep(input: { executionId: string; stepId: string; seq: number; closed?: WaitEnd; last?: boolean }) {
      return deps.automation.runStep(input.executionId, input.stepId, input.seq, input);
    },

    async automationBeginWait(input: { executionId: string; stepId: string; seq: number; eventName?: string; closed?: WaitEnd }) {
      return deps.automation.beginWait(input.executionId, input.stepId, input.seq, input.eventName, input.closed);
    },

    async automationFinish(input: { executionId: string; status: 'COMPLETED' | 'EXITED' | 'FAILED' | 'CANCELLED'; error?: string; closed?: WaitEnd }) {
      return deps.automation.finish(input.executionId, input.status, input.error, input.closed);
    },

    /** Refusals (a private address, a 4xx) are final; timeouts, 5xx and network errors are retried. */
    async automationWebhook(input: { executionId: string; stepId: string; seq: number; closed?: WaitEnd }) {
      try {
        return await deps.automation.webhook(input.executionId, input.stepId, input.seq, Context.current().info.attempt, input.closed);
      } catch (err) {
        if ((err as { retryable?: boolean }).retryable === false) throw ApplicationFailure.nonRetryable((err as Error).message, 'WebhookRefused');
        throw err;
      }
    },

    /** Starts executions and wakes waiting ones from the automation outbox until it has been empty a while. */
    async drainAutomationOutbox() {
      return deps.automationDispatcher.drain(drainWindow(deps));
    },

    /** Sends due webhook deliveries until there have been none for a while. */
    async drainWebhookDeliveries() {
      return deps.webhookDispatcher.drain(drainWindow(deps));
    },

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
      return { folded: await foldActivityCounts(deps.orm.em.fork()) };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;

/** What the campaign-chunk queue runs. */
export function campaignChunkActivities(deps: ActivityDeps) {
  const { deliverCampaignChunk } = createActivities(deps);
  return { deliverCampaignChunk };
}

/** What a worker's own task queue runs: the drains of its own email dispatchers. */
export function ownActivities(deps: ActivityDeps) {
  const { drainEmailQueue } = createActivities(deps);
  return { drainEmailQueue };
}
