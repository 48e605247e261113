import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { Resolver } from '../../dns/resolver';
import type { QueueSignal } from '../../db/work-queue';
import { callWebhook, WebhookError } from '../../net/guarded-http';
import { WebhookEndpoint } from './webhook-endpoints.entity';
import { signatureHeader, signingSecrets } from './webhook-endpoints.service';
import {
  type ClaimedDelivery,
  claimDeliveries,
  clearEndpointFailing,
  markEndpointFailing,
  nextDeliveryDueInSeconds,
  recordDelivered,
  recordFailedAttempt,
} from './webhooks-out.queries';

/** Attempts per delivery before it is FAILED (about a day with the default base of 5 s). */
export const MAX_ATTEMPTS = 8;
/** An endpoint that has failed every attempt for this long is disabled. */
const FAILING_DISABLES_MS = 5 * 86_400_000;
/** Deliveries of one endpoint claimed per round, and sent at once to it. */
const PER_ENDPOINT_CLAIM = 64;
const PER_ENDPOINT_CONCURRENCY = 16;
const CLAIM_BATCH = 1000;
/** Long enough for a claimed endpoint batch at the 10 s timeout (64 / 16 × 10 s), with room. */
const CLAIM_SECONDS = 120;
const TIMEOUT_MS = 10_000;

export interface WebhookDispatcherDeps {
  orm: MikroORM;
  queue: QueueSignal;
  log: Logger;
  resolver: Resolver;
  allowPrivate: boolean;
  /** The first retry waits this long; each later one six times longer (capped at 12 h), with ±10% jitter. */
  retryBaseSeconds: number;
}

type DrainOptions = { idleMs: number; maxMs: number; heartbeat: () => void; signal?: AbortSignal };

/** How long to wait before attempt `attempts + 1`. */
export function retryDelayMs(baseSeconds: number, attempts: number): number {
  const delay = Math.min(baseSeconds * 1000 * 6 ** (attempts - 1), 12 * 3600_000);
  return Math.round(delay * (0.9 + Math.random() * 0.2));
}

/**
 * Sends webhook deliveries: claims due ones with SKIP LOCKED (at most PER_ENDPOINT_CLAIM per endpoint,
 * never one of an endpoint this drain is still sending to), sends each endpoint's on its own, so a slow
 * or dead endpoint holds up only itself, and records every attempt on the delivery row.
 */
export class WebhookDispatcher {
  constructor(private readonly deps: WebhookDispatcherDeps) {}

  async drain(opts: DrainOptions): Promise<{ sent: number; idle: boolean; nextDueInSeconds: number | null }> {
    const busy = new Map<string, Promise<void>>();
    const report = { sent: 0 };
    const { idle } = await this.deps.queue.drain(opts, async () => {
      const rows = await this.claim({ exclude: [...busy.keys()] });
      for (const [endpointId, group] of Map.groupBy(rows, (r) => r.endpointId)) {
        const sending = this.sendEndpoint(endpointId, group, opts)
          .then((n) => void (report.sent += n))
          .catch((err) => this.deps.log.warn({ err, endpointId }, 'webhook deliveries failed; claims expire and they are tried again'))
          .finally(() => busy.delete(endpointId));
        busy.set(endpointId, sending);
      }
      return rows.length;
    });
    await Promise.all(busy.values());
    const due = await nextDeliveryDueInSeconds(this.deps.orm.em.fork());
    return { ...report, idle, nextDueInSeconds: due === null ? null : Math.max(0, due) };
  }

  /**
   * Claims due deliveries: at most PER_ENDPOINT_CLAIM of each endpoint, of one endpoint (`only`) or of
   * any but those this drain is sending to (`exclude`).
   */
  private claim(which: { only?: string; exclude?: string[] }): Promise<ClaimedDelivery[]> {
    return claimDeliveries(this.deps.orm.em.fork(), which, { perEndpoint: PER_ENDPOINT_CLAIM, total: CLAIM_BATCH, seconds: CLAIM_SECONDS });
  }

  /**
   * Sends one endpoint's deliveries, PER_ENDPOINT_CONCURRENCY at a time, and claims its next due ones
   * as each batch ends, until none are due (so a busy endpoint never waits for the others' round);
   * answers how many succeeded.
   */
  private async sendEndpoint(endpointId: string, first: ClaimedDelivery[], opts: DrainOptions): Promise<number> {
    let succeeded = 0;
    for (let batch = first; batch.length && !opts.signal?.aborted; batch = await this.claim({ only: endpointId })) {
      // Read afresh per batch: a rotated secret signs from the next batch on.
      const endpoint = await this.deps.orm.em.fork().findOne(WebhookEndpoint, endpointId);
      if (!endpoint) break;
      let next = 0;
      const worker = async () => {
        while (next < batch.length) {
          if (await this.attempt(endpoint, batch[next++], opts.signal)) succeeded++;
        }
      };
      await Promise.all(Array.from({ length: Math.min(PER_ENDPOINT_CONCURRENCY, batch.length) }, worker));
      opts.heartbeat();
    }
    return succeeded;
  }

  private async attempt(endpoint: WebhookEndpoint, d: ClaimedDelivery, signal?: AbortSignal): Promise<boolean> {
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'content-type': 'application/json',
      'webhook-id': d.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(signingSecrets(endpoint), d.id, timestamp, d.body),
    };
    let status: number | undefined;
    let error: string | undefined;
    try {
      const res = await callWebhook(
        { url: endpoint.url, method: 'POST', headers, body: d.body },
        { resolver: this.deps.resolver, allowPrivate: this.deps.allowPrivate, timeoutMs: TIMEOUT_MS, signal },
      );
      status = res.status;
      if (res.status < 200 || res.status >= 300) error = `answered ${res.status}`;
    } catch (err) {
      status = err instanceof WebhookError ? err.status : undefined;
      error = (err as Error).message;
      if (err instanceof WebhookError && err.detail)
        this.deps.log.warn({ endpointId: endpoint.id, deliveryId: d.id, detail: err.detail }, `webhook delivery refused: ${error}`);
    }
    const em = this.deps.orm.em.fork();
    if (!error) {
      await recordDelivered(em, d.id, status);
      if (endpoint.failingSince) await clearEndpointFailing(em, endpoint.id);
      return true;
    }
    const attempts = d.attempts + 1;
    const gone = status === 410;
    const final = gone || attempts >= MAX_ATTEMPTS;
    await recordFailedAttempt(em, {
      id: d.id,
      attempts,
      final,
      statusCode: status ?? null,
      error: error.slice(0, 1000),
      retryInSeconds: final ? 0 : retryDelayMs(this.deps.retryBaseSeconds, attempts) / 1000,
    });
    // A 410 disables the endpoint at once; failing everything for FAILING_DISABLES_MS does too.
    await markEndpointFailing(em, endpoint.id, gone, FAILING_DISABLES_MS / 1000);
    return false;
  }
}
