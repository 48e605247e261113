import type { Logger } from 'pino';
import { PgListener } from './listener';

/**
 * Wakes one drain alone (`QueueSignal.drain`'s `bell`): for work handed to that drain, which no other
 * drain could take, so ringing every drain would only make the others look for work in vain.
 */
export class DrainBell {
  rung = 0;
  /** The drain's wait, while it waits. */
  waiter?: () => void;

  ring(): void {
    this.rung++;
    this.waiter?.();
  }
}

/**
 * PostgreSQL LISTEN on a channel that a queuing transaction NOTIFYs at commit. It wakes this
 * process's drains that wait for work, and, when none runs here, tells `onIdleNotification` (the
 * worker signals its standing dispatcher executions, which otherwise sleep without an activity in
 * flight). Without the listener connection, drains still poll, only more often; when it is back
 * (PostgreSQL restarted), everything waits as if notified, since what was queued meanwhile said nothing.
 */
export class QueueSignal {
  private readonly listener: PgListener;
  private listenedBefore = false;
  private waiters = new Set<() => void>();
  private seq = 0;
  private active = 0;
  private idleListener?: () => void;

  constructor(databaseUrl: string, channel: string, log: Logger) {
    this.listener = new PgListener(
      databaseUrl,
      channel,
      {
        notification: () => this.notified(),
        listening: () => {
          if (this.listenedBefore) this.notified();
          this.listenedBefore = true;
        },
      },
      log,
      `the ${channel} queue`,
    );
  }

  async start(): Promise<void> {
    await this.listener.start();
  }

  /** Called for notifications that arrive while no drain of this process runs. */
  onIdleNotification(listener: () => void): void {
    this.idleListener = listener;
  }

  /** Whether a drain of this process is taking work now. */
  get draining(): boolean {
    return this.active > 0;
  }

  /**
   * Work this process queued, told after its transaction committed, in place of a NOTIFY: for a writer
   * that saw `draining` and so sent none. Whichever way it goes it is taken: by the drain still running,
   * by that drain's last look for what is due (it ends after this commit), or by the dispatchers this
   * wakes as a notification would.
   */
  queuedHere(): void {
    this.notified();
  }

  /** Counts notifications; a drain reads it before looking for work and passes it to `wait`. */
  get sequence(): number {
    return this.seq;
  }

  private notified(): void {
    this.seq++;
    for (const wake of this.waiters) wake();
    this.waiters.clear();
    if (this.active === 0) this.idleListener?.();
  }

  /**
   * Resolves on the next notification (at once if one came after `since`), after `ms`, or when
   * `signal` aborts.
   */
  wait(ms: number, since: number, signal?: AbortSignal, bell?: { bell: DrainBell; since: number }): Promise<void> {
    if (this.seq !== since || signal?.aborted || (bell && bell.bell.rung !== bell.since)) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.waiters.delete(done);
        if (bell) bell.bell.waiter = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.listener.isListening ? ms : Math.min(ms, 500));
      signal?.addEventListener('abort', done);
      this.waiters.add(done);
      if (bell) bell.bell.waiter = done;
    });
  }

  /**
   * Runs a drain: takes work with `round` (which returns how much it handled) until there has been
   * none for `idleMs`, `maxMs` have passed, or `signal` aborts. `idle` says whether it stopped for
   * lack of work. While it runs, this process's notifications are its own.
   */
  async drain(
    opts: { idleMs: number; maxMs: number; heartbeat: () => void; signal?: AbortSignal; bell?: DrainBell },
    round: () => Promise<number>,
  ): Promise<{ idle: boolean }> {
    this.active++;
    try {
      const start = Date.now();
      let lastWork = start;
      for (;;) {
        const now = Date.now();
        if (opts.signal?.aborted || now - start >= opts.maxMs) return { idle: false };
        if (now - lastWork >= opts.idleMs) return { idle: true };
        opts.heartbeat();
        const since = this.seq;
        const rung = opts.bell?.rung ?? 0;
        if ((await round()) > 0) lastWork = Date.now();
        // Also polls once a second: work can come due (a retry) without a notification. A round that took
        // longer than what was left of idleMs leaves nothing to wait (a negative timeout is a warning).
        else
          await this.wait(
            Math.max(0, Math.min(1000, opts.idleMs - (Date.now() - lastWork))),
            since,
            opts.signal,
            opts.bell && { bell: opts.bell, since: rung },
          );
      }
    } finally {
      this.active--;
    }
  }

  async stop(): Promise<void> {
    for (const wake of this.waiters) wake();
    this.waiters.clear();
    this.idleListener = undefined;
    await this.listener.stop();
  }
}
