import type { MikroORM } from '@mikro-orm/postgresql';
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import type { ActivityHub } from '../../src/bus/contact-activity';
import type { DeliveryEngine } from '../../src/delivery';
import type { Resolver } from '../../src/dns/resolver';
import type { Mailer } from '../../src/mail/transport';
import type { AutomationDispatcher, AutomationRuntime } from '../../src/modules/automations';
import type { CampaignStops } from '../../src/modules/campaigns';
import type { ConsentDeps } from '../../src/modules/consent';
import type { ReturnPathDns } from '../../src/modules/domains';
import type { WebhookDispatcher } from '../../src/modules/webhooks-out';

/** Everything the activities reach, handed in by the worker (main.ts builds it). */
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

/** A standing drain's window: how long it may idle and run, its heartbeat and the activity's cancellation. */
export function drainWindow(deps: ActivityDeps) {
  const ctx = Context.current();
  return { idleMs: deps.dispatchIdleSeconds * 1000, maxMs: DRAIN_MAX_MS, heartbeat: () => ctx.heartbeat(), signal: ctx.cancellationSignal };
}
