/**
 * Task queues with long-poll matching. A task is only a reference; whether it is still valid is
 * decided when a poller takes it (`take` returns undefined for stale tasks, which are dropped), so
 * cancelling a workflow never has to hunt its tasks down in queues.
 */
import type { CallContext } from '../rpc/grpc-server';

export type QueueKind = 'workflow' | 'activity';

/** A queued unit of work; `take` builds the poll response for `identity`, or undefined if stale. */
export interface QueuedTask {
  take(identity: string): Buffer | object | undefined;
}

/** Who polls: the worker's identity, and the instance key one worker (one task queue) sends with each poll. */
export interface PollerId {
  identity: string;
  workerInstanceKey?: string;
}

/** The poller of a poll request. */
export const pollerOf = (req: { identity?: string | null; workerInstanceKey?: string | null }): PollerId => ({
  identity: req.identity ?? '',
  workerInstanceKey: req.workerInstanceKey || undefined,
});

interface Poller extends PollerId {
  ctx: CallContext;
  done: boolean;
  finish(result: Buffer | object | undefined): void;
}

class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  unshift(item: T): void {
    if (this.head > 0) this.items[--this.head] = item;
    else this.items.unshift(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head];
    this.items[this.head++] = undefined;
    // Compact now and then so a long-lived queue does not keep a growing array of holes.
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  remove(item: T): void {
    const i = this.items.indexOf(item, this.head);
    if (i >= 0) this.items.splice(i, 1);
  }
}

class TaskQueue {
  readonly tasks = new Fifo<QueuedTask>();
  readonly pollers = new Fifo<Poller>();
  /** identity -> last poll time, for DescribeTaskQueue. */
  readonly recentPollers = new Map<string, number>();
}

export interface PollerInfo {
  identity: string;
  lastAccessTime: number;
}

/** How long the polls of a worker that announced its shutdown are answered "no task" at once. */
const SHUTDOWN_MEMORY_MS = 5 * 60_000;

export class Matching {
  private readonly queues = new Map<string, TaskQueue>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** `<namespace>\0<worker instance key>` -> until when its polls get "no task" at once. */
  private readonly shutDown = new Map<string, number>();

  private queue(namespace: string, kind: QueueKind, name: string): TaskQueue {
    const key = `${namespace}\u0000${kind}\u0000${name}`;
    let q = this.queues.get(key);
    if (!q) {
      q = new TaskQueue();
      this.queues.set(key, q);
    }
    return q;
  }

  add(namespace: string, kind: QueueKind, name: string, task: QueuedTask): void {
    const q = this.queue(namespace, kind, name);
    for (;;) {
      const poller = q.pollers.shift();
      if (!poller) break;
      if (poller.done || poller.ctx.cancelled) continue;
      const response = task.take(poller.identity);
      if (response === undefined) {
        q.pollers.unshift(poller);
        return;
      }
      poller.finish(response);
      return;
    }
    q.tasks.push(task);
  }

  /** Long-polls `name` for up to `waitMs`; resolves undefined when nothing came (an empty response). */
  poll(namespace: string, kind: QueueKind, name: string, who: PollerId, ctx: CallContext, waitMs: number): Promise<Buffer | object | undefined> {
    const { identity } = who;
    if (who.workerInstanceKey && (this.shutDown.get(`${namespace}\u0000${who.workerInstanceKey}`) ?? 0) > Date.now()) return Promise.resolve(undefined);
    const q = this.queue(namespace, kind, name);
    q.recentPollers.set(identity, Date.now());
    for (;;) {
      const task = q.tasks.shift();
      if (!task) break;
      const response = task.take(identity);
      if (response !== undefined) return Promise.resolve(response);
    }
    return this.wait(
      ctx,
      waitMs,
      who,
      (p) => q.pollers.push(p),
      (p) => q.pollers.remove(p),
    );
  }

  /**
   * A worker is shutting down (ShutdownWorker): its waiting polls are answered "no task" now, so it
   * stops without waiting out its long polls or cancelling them (a cancelled poll can race a task
   * handed to it). Polls it still sends are answered the same way. Known by its instance key; a worker
   * without one is known by its identity and task queue, and only its waiting polls are answered.
   */
  completeWorkerPolls(namespace: string, worker: { workerInstanceKey?: string; identity?: string; taskQueue?: string }): number {
    const now = Date.now();
    for (const [k, until] of this.shutDown) if (until <= now) this.shutDown.delete(k);
    if (worker.workerInstanceKey) this.shutDown.set(`${namespace}\u0000${worker.workerInstanceKey}`, now + SHUTDOWN_MEMORY_MS);
    const ours = (p: Poller) =>
      worker.workerInstanceKey ? p.workerInstanceKey === worker.workerInstanceKey : !!worker.identity && p.identity === worker.identity;
    let completed = 0;
    for (const [key, q] of this.queues) {
      const [ns, , name] = key.split('\u0000');
      if (ns !== namespace || (!worker.workerInstanceKey && worker.taskQueue && name !== worker.taskQueue)) continue;
      const waiting: Poller[] = [];
      for (let p = q.pollers.shift(); p; p = q.pollers.shift()) waiting.push(p);
      for (const p of waiting) {
        if (ours(p)) {
          p.finish(undefined);
          completed++;
        } else q.pollers.push(p);
      }
    }
    return completed;
  }

  /** Removes a queue (a worker's sticky queue at its shutdown): waiting polls get "no task". */
  drop(namespace: string, kind: QueueKind, name: string): void {
    const key = `${namespace}\u0000${kind}\u0000${name}`;
    const q = this.queues.get(key);
    if (!q) return;
    this.queues.delete(key);
    for (let p = q.pollers.shift(); p; p = q.pollers.shift()) p.finish(undefined);
  }

  private wait(
    ctx: CallContext,
    waitMs: number,
    who: PollerId,
    enqueue: (p: Poller) => void,
    dequeue: (p: Poller) => void,
  ): Promise<Buffer | object | undefined> {
    return new Promise((resolve) => {
      const poller: Poller = {
        ...who,
        ctx,
        done: false,
        finish: (result) => {
          if (poller.done) return;
          poller.done = true;
          clearTimeout(timer);
          this.timers.delete(timer);
          dequeue(poller);
          resolve(result);
        },
      };
      const timer = setTimeout(() => poller.finish(undefined), waitMs);
      this.timers.add(timer);
      // A poll the worker gave up on must leave the queue, or a task would be handed to nobody.
      ctx.onCancel(() => poller.finish(undefined));
      enqueue(poller);
    });
  }

  backlog(namespace: string, kind: QueueKind, name: string): number {
    return this.queues.get(`${namespace}\u0000${kind}\u0000${name}`)?.tasks.length ?? 0;
  }

  pollers(namespace: string, kind: QueueKind, name: string): PollerInfo[] {
    const q = this.queues.get(`${namespace}\u0000${kind}\u0000${name}`);
    return [...(q?.recentPollers ?? [])].map(([identity, lastAccessTime]) => ({ identity, lastAccessTime }));
  }

  /** Answers every waiting poll with "no task" (server shutdown). */
  stop(): void {
    for (const q of this.queues.values()) {
      for (let p = q.pollers.shift(); p; p = q.pollers.shift()) p.finish(undefined);
    }
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
