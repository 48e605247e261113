import type { Logger } from 'pino';
import { PgListener } from '../../db/listener';

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

  private stopped(campaignId: string): void {
    for (const controller of this.running.get(campaignId) ?? []) controller.abort();
  }
}
