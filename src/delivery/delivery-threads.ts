import type { Worker } from 'node:worker_threads';
import { type DraftMessage, finished } from '../mail/compose';
import type { DkimKey } from '../mail/dkim';
import { Links } from '../mail/links';
import { encodeMessage, type OutgoingMessage } from '../mail/mime';
import { type DeliveryOutcome, SmtpSessions } from '../mail/transport';
import { startThread as startWorkerThread } from '../thread-start';

/** How SMTP answered, and the subject the message went out with (a draft's is rendered on the way). */
export interface Delivery {
  outcome: DeliveryOutcome;
  subject: string;
}

/** Renders a draft, encodes, signs and sends one message; says how SMTP answered. */
export interface MessageSender {
  send(message: OutgoingMessage | DraftMessage, dkim?: DkimKey): Promise<Delivery>;
  close(): Promise<void>;
}

export interface DeliveryJob {
  id: number;
  message: OutgoingMessage | DraftMessage;
  /** The signing key's number in this process; the key itself comes along the first time a thread needs it. */
  keyId?: number;
  key?: DkimKey;
}

/** In the calling thread: for MAIL_THREADS=0. The signature still runs on libuv's threadpool. */
export class InProcessSender implements MessageSender {
  private readonly sessions: SmtpSessions;

  constructor(
    smtpUrl: string,
    maxConnections: number,
    private readonly links: Links,
  ) {
    this.sessions = new SmtpSessions(smtpUrl, maxConnections);
  }

  async send(draft: OutgoingMessage | DraftMessage, dkim?: DkimKey): Promise<Delivery> {
    const message = finished(draft, this.links);
    const encoded = await encodeMessage(message, dkim);
    return { outcome: await this.sessions.send(encoded.envelope, encoded.raw), subject: message.subject };
  }

  async close(): Promise<void> {
    this.sessions.close();
  }
}

/**
 * A thread's young generation, capped: left to V8's default on a large machine it grows the worker's
 * memory a lot at the same delivery rate (docs/performance.md). The old generation is not capped: a
 * 40 MB message must never run a thread out of memory.
 */
const LIMITS = { maxYoungGenerationSizeMb: 8 };

const startThread = (workerData: unknown): Worker => startWorkerThread(__dirname, 'delivery-thread', workerData, LIMITS);

export interface DeliveryThreadData {
  smtpUrl: string;
  maxConnections: number;
  publicUrl: string;
  linksKey: Links['key'];
}

interface Thread {
  worker: Worker;
  pending: Map<number, (delivery: Delivery) => void>;
  /** Keys this thread already holds: cloning a KeyObject into a thread costs more than encoding the message. */
  keys: Set<number>;
}

/**
 * Delivery on `threads` worker threads, each with its share of the `maxConnections` SMTP
 * connections: encoding, signing and the SMTP conversation leave the event loop that claims and
 * records, and use every core. A message goes to the thread with the fewest in flight.
 */
export class DeliveryThreads implements MessageSender {
  private readonly threads: Thread[] = [];
  private seq = 0;
  private closing = false;
  private readonly keyIds = new WeakMap<DkimKey['privateKey'], number>();
  private keySeq = 0;

  constructor(
    private readonly smtpUrl: string,
    opts: { threads: number; maxConnections: number },
    /** Drafts are rendered in the threads, with links signed by the same key. */
    private readonly links: Links,
  ) {
    const n = Math.max(1, Math.min(opts.threads, opts.maxConnections));
    for (let i = 0; i < n; i++) this.spawn(i, Math.floor(opts.maxConnections / n) + (i < opts.maxConnections % n ? 1 : 0));
  }

  private spawn(slot: number, maxConnections: number): void {
    const workerData: DeliveryThreadData = { smtpUrl: this.smtpUrl, maxConnections, publicUrl: this.links.publicUrl, linksKey: this.links.key };
    const thread: Thread = { worker: startThread(workerData), pending: new Map(), keys: new Set() };
    thread.worker.on('message', (m: { id: number } & Delivery) => {
      const done = thread.pending.get(m.id);
      thread.pending.delete(m.id);
      done?.({ outcome: m.outcome, subject: m.subject });
    });
    // A thread that dies takes its messages' outcomes with it: they are reported unreachable (so they wait
    // and are sent again), and a new thread takes its place.
    thread.worker.on('error', (err) => this.fail(thread, err.message));
    thread.worker.once('exit', (code) => {
      this.fail(thread, `delivery thread exited with ${code}`);
      if (!this.closing) this.spawn(slot, maxConnections);
    });
    thread.worker.unref();
    this.threads[slot] = thread;
  }

  private fail(thread: Thread, error: string): void {
    for (const done of thread.pending.values()) done({ outcome: { kind: 'unreachable', error }, subject: '' });
    thread.pending.clear();
  }

  send(message: OutgoingMessage | DraftMessage, dkim?: DkimKey): Promise<Delivery> {
    const thread = this.threads.reduce((a, b) => (b.pending.size < a.pending.size ? b : a));
    const id = ++this.seq;
    const job: DeliveryJob = { id, message };
    if (dkim) {
      let keyId = this.keyIds.get(dkim.privateKey);
      if (keyId === undefined) this.keyIds.set(dkim.privateKey, (keyId = ++this.keySeq));
      job.keyId = keyId;
      if (!thread.keys.has(keyId)) {
        thread.keys.add(keyId);
        job.key = dkim;
      }
    }
    return new Promise((resolve) => {
      thread.pending.set(id, resolve);
      thread.worker.postMessage(job);
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.threads.map(async (t) => {
        t.worker.postMessage('close');
        await Promise.race([new Promise((r) => t.worker.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
        await t.worker.terminate();
      }),
    );
  }
}
