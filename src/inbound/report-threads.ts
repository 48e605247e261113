import type { Worker } from 'node:worker_threads';
import { startThread } from '../thread-start';
import type { ReceivedMessage } from './received-message';
import { type InboundReport, MAX_MESSAGE_BYTES } from './bounce-report';

/** Reads what came back to the MX into a report. */
export interface ReportReader {
  read(raw: Buffer): Promise<InboundReport>;
  /**
   * Mail to an inbound host: whether it is a report (a bounce, an auto-reply...) and, when it is not, the message
   * parsed (`mail` absent when it could not be read).
   */
  readReceived(raw: Buffer): Promise<ReceivedReading>;
  close(): Promise<void>;
}

export interface ReceivedReading {
  report: InboundReport;
  mail?: ReceivedMessage;
}

export interface ReportJob {
  id: number;
  raw: Uint8Array;
  /** 'received': the whole message, read as received mail too when it is no report. */
  kind: 'report' | 'received';
}

/** A thread that holds more than this is ended (the message is answered unreadable), so one message cannot exhaust memory. */
const LIMITS = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 16 };

interface Job {
  id: number;
  raw: Uint8Array;
  kind: ReportJob['kind'];
  done: (reading: ReceivedReading) => void;
  /** The service is stopping: the MX answers 451 and the sender tries again. */
  fail: (error: Error) => void;
}

interface Thread {
  worker: Worker;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  /** Ended or ending: it takes no more jobs. */
  dead: boolean;
}

/**
 * Reports are read on worker threads, one message at a time each, so no inbound message can hold the event loop that
 * answers HTTP and SMTP. A message a thread has not read within the deadline (never expected: the reading is bounded)
 * ends that thread and is answered unreadable; a new thread takes its place.
 */
export class ReportThreads implements ReportReader {
  private readonly threads: Thread[] = [];
  private readonly queue: Job[] = [];
  private seq = 0;
  private closing = false;

  constructor(private readonly opts: { threads: number; deadlineMs: number }) {
    for (let i = 0; i < Math.max(1, opts.threads); i++) this.spawn(i);
  }

  private spawn(slot: number): void {
    const thread: Thread = { worker: startThread(__dirname, 'report-thread', null, LIMITS), job: null, timer: null, dead: false };
    thread.worker.on('message', (m: { id: number; reading: ReceivedReading }) => {
      if (thread.job?.id !== m.id) return;
      this.finish(thread, m.reading);
    });
    thread.worker.on('error', () => undefined);
    thread.worker.once('exit', () => {
      thread.dead = true;
      if (thread.job && this.closing) thread.job.fail(new Error('the report reader stopped'));
      else if (thread.job) this.finish(thread, { report: { kind: 'unknown', why: 'unreadable: the reader thread stopped on this message' } });
      // A second later, so a thread that cannot start does not spin.
      if (this.threads[slot] === thread && !this.closing) setTimeout(() => !this.closing && this.spawn(slot), 1000).unref();
    });
    thread.worker.unref();
    this.threads[slot] = thread;
    this.next();
  }

  private finish(thread: Thread, reading: ReceivedReading): void {
    const job = thread.job;
    if (thread.timer) clearTimeout(thread.timer);
    thread.job = null;
    thread.timer = null;
    job?.done(reading);
    this.next();
  }

  private next(): void {
    for (const thread of this.threads) {
      if (!thread || thread.dead || thread.job || this.queue.length === 0) continue;
      const job = this.queue.shift()!;
      thread.job = job;
      thread.timer = setTimeout(() => {
        thread.dead = true;
        this.finish(thread, { report: { kind: 'unknown', why: 'unreadable: reading it took too long' } });
        void thread.worker.terminate();
      }, this.opts.deadlineMs);
      thread.timer.unref();
      thread.worker.postMessage({ id: job.id, raw: job.raw, kind: job.kind } satisfies ReportJob);
    }
  }

  async read(raw: Buffer): Promise<InboundReport> {
    // Only the head is read (bounce-report.ts); the rest need not be copied to a thread.
    return (await this.submit(new Uint8Array(raw.subarray(0, MAX_MESSAGE_BYTES)), 'report')).report;
  }

  readReceived(raw: Buffer): Promise<ReceivedReading> {
    return this.submit(new Uint8Array(raw), 'received');
  }

  private submit(raw: Uint8Array, kind: ReportJob['kind']): Promise<ReceivedReading> {
    if (this.closing) return Promise.reject(new Error('the report reader is closed'));
    return new Promise((resolve, reject) => {
      this.queue.push({ id: ++this.seq, raw, kind, done: resolve, fail: reject });
      this.next();
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const job of this.queue.splice(0)) job.fail(new Error('the report reader stopped'));
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}
