import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { PgListener } from '../../db/listener';
import { CampaignSchema } from './campaigns.entity';

/** How often a campaign chunk reads whether its campaign still sends: a cancel whose notification was lost stops it within this. */
const CAMPAIGN_WATCH_MS = 500;

/** NOTIFY'd by a cancel's transaction with the campaign's id, so every worker hears it at the commit. */
export const CAMPAIGN_STOPPED_CHANNEL = 'postbox_campaign_stopped';

/**
 * The campaign chunks this worker process is delivering, by campaign. A cancel's NOTIFY stops that
 * campaign's chunks at once, on every worker of the pool; each chunk still reads its campaign's row
 * now and then, for a notification lost while the listener reconnects.
 */
export class CampaignStops {
  private readonly running = new Map<string, Set<AbortController>>();
  private readonly listener: PgListener;

  constructor(databaseUrl: string, log: Logger) {
    this.listener = new PgListener(databaseUrl, CAMPAIGN_STOPPED_CHANNEL, { notification: (id) => this.stopped(id) }, log, 'the campaign cancel channel');
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }

  /** A signal that aborts when the campaign is cancelled; `release` it when the chunk ends. */
  watch(campaignId: string): { signal: AbortSignal; release: () => void } {
    const controller = new AbortController();
    const chunks = this.running.get(campaignId) ?? new Set();
    chunks.add(controller);
    this.running.set(campaignId, chunks);
    return {
      signal: controller.signal,
      release: () => {
        chunks.delete(controller);
        if (!chunks.size && this.running.get(campaignId) === chunks) this.running.delete(campaignId);
      },
    };
  }

  /**
   * Runs one chunk's delivery while its campaign still sends: not at all when it no longer does, and
   * aborted (`stopped`) when it stops meanwhile. A cancel reaches a running Temporal activity only in a
   * heartbeat's answer, which the SDK throttles to most of the heartbeat timeout; so the cancel's
   * notification stops every chunk in flight at its commit, and the campaign's own row, read now and
   * then, does if that notification was lost.
   */
  async deliverWhileSending<R extends { claimed: number; sent: number; retried: number; failed: number }>(
    em: EntityManager,
    campaignId: string,
    cancellation: AbortSignal,
    deliver: (signal: AbortSignal) => Promise<R>,
  ): Promise<{ stopped: boolean } & (R | { claimed: 0; sent: 0; retried: 0; failed: 0 })> {
    const sending = async () => (await em.fork().findOne(CampaignSchema, campaignId, { fields: ['status'] }))?.status === 'SENDING';
    const notified = this.watch(campaignId);
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
      const r = await deliver(AbortSignal.any([cancellation, cancelled.signal, notified.signal]));
      return { stopped: cancelled.signal.aborted || notified.signal.aborted, ...r };
    } finally {
      clearInterval(watch);
      notified.release();
    }
  }

  private stopped(campaignId: string): void {
    for (const controller of this.running.get(campaignId) ?? []) controller.abort();
  }
}
