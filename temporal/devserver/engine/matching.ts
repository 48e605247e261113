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

interface Poller {
  identity: string;
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

export class Matching {
  private readonly queues = new Map<string, TaskQueue>();
  private readonly timers = new Set<NodeJS.Timeout>();

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
  poll(namespace: string, kind: QueueKind, name: string, identity: string, ctx: CallContext, waitMs: number): Promise<Buffer | object | undefined> {
    const q = this.queue(namespace, kind, name);
    q.recentPollers.set(identity, Date.now());
    for (;;) {
      const task = q.tasks.shift();
      if (!task) break;
      const response = task.take(identity);
      if (response !== undefined) return Promise.resolve(response);
    }
    return this.wait(ctx, waitMs, identity, (p) => q.pollers.push(p), (p) => q.pollers.remove(p));
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
    identity: string,
    enqueue: (p: Poller) => void,
    dequeue: (p: Poller) => void,
  ): Promise<Buffer | object | undefined> {
    return new Promise((resolve) => {
      const poller: Poller = {
        identity,
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
