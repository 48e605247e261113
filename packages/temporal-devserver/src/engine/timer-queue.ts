/**
 * The server's only source of time and its only timer: one min-heap of deadlines driven by a single
 * setTimeout, so a million pending timers cost a million small heap entries, not a million handles.
 *
 * With time skipping on, the clock is wall time plus an offset. While anything is "in flight"
 * (a workflow or activity task waiting for a worker, an external lock from the test client) time
 * runs at wall-clock speed; when nothing is, the clock jumps straight to the next deadline, which is
 * how Temporal's Java test server behaves.
 */

export interface Clock {
  now(): number;
}

/** Anything that wants to be called back at a time: an execution, a test-service sleep. */
export interface TimerOwner {
  /** Maintained by the queue: position in the heap, -1 when not scheduled. */
  timerIndex: number;
  timerAt: number;
  onTimer(now: number): void;
}

const MAX_DELAY = 2 ** 31 - 1;

export class TimerQueue implements Clock {
  private readonly heap: TimerOwner[] = [];
  private handle: NodeJS.Timeout | undefined;
  private armedAt = Infinity;
  private offset = 0;
  private skipCheckPending = false;
  private stopped = false;
  /** Locks taken by the test client (LockTimeSkipping); the test server starts locked. */
  private externalLocks: number;

  constructor(
    private readonly skipping: boolean,
    /** How many things are in flight right now (tasks waiting for workers); only read when skipping. */
    private readonly inFlight: () => number = () => 0,
    initialLocks = 1,
  ) {
    this.externalLocks = skipping ? initialLocks : 0;
  }

  get timeSkipping(): boolean {
    return this.skipping;
  }

  now(): number {
    return Date.now() + this.offset;
  }

  get size(): number {
    return this.heap.length;
  }

  /** Schedules or moves `owner` to fire at `at`; `undefined` cancels. */
  set(owner: TimerOwner, at: number | undefined): void {
    if (at === undefined) {
      this.cancel(owner);
      return;
    }
    if (owner.timerIndex >= 0) {
      const old = owner.timerAt;
      owner.timerAt = at;
      if (at < old) this.siftUp(owner.timerIndex);
      else if (at > old) this.siftDown(owner.timerIndex);
    } else {
      owner.timerAt = at;
      owner.timerIndex = this.heap.length;
      this.heap.push(owner);
      this.siftUp(owner.timerIndex);
    }
    this.arm();
  }

  cancel(owner: TimerOwner): void {
    const i = owner.timerIndex;
    if (i < 0) return;
    const last = this.heap.pop()!;
    owner.timerIndex = -1;
    if (last !== owner) {
      this.heap[i] = last;
      last.timerIndex = i;
      this.siftDown(i);
      this.siftUp(last.timerIndex);
    }
    this.arm();
  }

  // ---- time skipping (TestService)

  /** Moves a skipping clock forward to `at` (never back): after a restart, to where it had got to. */
  advanceTo(at: number): void {
    if (!this.skipping) return;
    const now = this.now();
    if (at > now) this.offset += at - now;
  }

  lock(): void {
    this.externalLocks++;
  }

  unlock(): void {
    if (this.externalLocks === 0) throw new Error('time skipping is not locked');
    this.externalLocks--;
    this.poke();
  }

  /** Re-evaluates whether time may jump; call whenever something in flight may have finished. */
  poke(): void {
    if (!this.skipping || this.skipCheckPending || this.stopped) return;
    this.skipCheckPending = true;
    // setImmediate lets the operation that finished settle (and take new locks) before time moves.
    setImmediate(() => {
      this.skipCheckPending = false;
      this.skipIfIdle();
    });
  }

  stop(): void {
    this.stopped = true;
    if (this.handle) clearTimeout(this.handle);
    this.handle = undefined;
  }

  private skipIfIdle(): void {
    if (this.stopped || this.externalLocks > 0 || this.inFlight() > 0 || this.heap.length === 0) return;
    const next = this.heap[0].timerAt;
    const now = this.now();
    if (next > now) this.offset += next - now;
    this.fireDue();
  }

  private arm(): void {
    if (this.stopped) return;
    const next = this.heap.length ? this.heap[0].timerAt : Infinity;
    if (next === this.armedAt) return;
    if (this.handle) clearTimeout(this.handle);
    this.handle = undefined;
    this.armedAt = next;
    if (next === Infinity) return;
    const delay = Math.min(MAX_DELAY, Math.max(0, next - this.now()));
    this.handle = setTimeout(() => {
      this.handle = undefined;
      this.armedAt = Infinity;
      this.fireDue();
    }, delay);
    this.handle.unref();
    if (this.skipping) this.poke();
  }

  private fireDue(): void {
    const now = this.now();
    while (this.heap.length && this.heap[0].timerAt <= now) {
      const owner = this.heap[0];
      this.cancel(owner);
      try {
        owner.onTimer(now);
      } catch (err) {
        // A failing owner must not stop the other timers; owners log their own errors.
        process.emitWarning(`dev server timer callback failed: ${String(err)}`);
      }
    }
    this.arm();
    if (this.skipping) this.poke();
  }

  private siftUp(i: number): void {
    const h = this.heap;
    const item = h[i];
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p].timerAt <= item.timerAt) break;
      h[i] = h[p];
      h[i].timerIndex = i;
      i = p;
    }
    h[i] = item;
    item.timerIndex = i;
  }

  private siftDown(i: number): void {
    const h = this.heap;
    const n = h.length;
    const item = h[i];
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && h[r].timerAt < h[l].timerAt ? r : l;
      if (h[c].timerAt >= item.timerAt) break;
      h[i] = h[c];
      h[i].timerIndex = i;
      i = c;
    }
    h[i] = item;
    item.timerIndex = i;
  }
}

/** A one-shot timer for callers that are not long-lived owners (test-service sleeps). */
export function sleepUntil(queue: TimerQueue, at: number, fn: () => void): TimerOwner {
  const owner: TimerOwner = { timerIndex: -1, timerAt: at, onTimer: () => fn() };
  queue.set(owner, at);
  return owner;
}
