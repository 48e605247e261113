import type { QueuedEmail } from './queued-email';

/**
 * While requests hand mail to a drain, how long a claim that found the shared queue empty keeps the
 * drain from claiming again (each claim is a statement): the longest that mail queued unclaimed by
 * another process, or a retry coming due, waits behind handed-over mail.
 */
export const SHARED_RECHECK_MS = 500;

/** Mail a request of this process queues for a running drain: claimed for it when inserted, handed over in memory. */
export interface DrainClaimant {
  /** The drain's owner, written as `claimed_by` with the rows. */
  owner: string;
  /** After the request's statement, exactly once: the rows it queued claimed for `owner`, or none. */
  handOver(emails: QueuedEmail[]): void;
}

/**
 * One drain's intake of handed-over mail. A drain must not end (return or throw) while a request it
 * gave a claim to is still writing: mail committed after the owner's next drain took its claims back
 * would otherwise wait for its claim to expire.
 */
export class HandOver {
  readonly ready: QueuedEmail[] = [];
  private writing = 0;
  private open = true;
  private settled?: () => void;

  /** At most `max` rows wait or are being written (a claim batch's worth): past it, requests queue mail unclaimed. */
  constructor(
    readonly owner: string,
    private readonly max: number,
    private readonly wake: () => void,
  ) {}

  claimant(): DrainClaimant | undefined {
    if (!this.open || this.ready.length + this.writing >= this.max) return undefined;
    this.writing++;
    let done = false;
    return {
      owner: this.owner,
      handOver: (emails) => {
        if (done) return;
        done = true;
        this.ready.push(...emails);
        if (--this.writing === 0) this.settled?.();
        this.wake();
      },
    };
  }

  /** No more claimants; resolves once every request given one has handed over. */
  async close(): Promise<void> {
    this.open = false;
    while (this.writing > 0) await new Promise<void>((resolve) => (this.settled = resolve));
  }
}
