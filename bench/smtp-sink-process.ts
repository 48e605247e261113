/**
 * The benchmarks' SMTP listener, in a process of its own: receiving mail must not share an event
 * loop with the load generator or with the raw nodemailer it is compared with, or the listener, not
 * the sender, sets the rate. It counts messages and drops them.
 */
import { fork } from 'node:child_process';
import crypto from 'node:crypto';
import { createTransport } from 'nodemailer';
import { SmtpSink } from '../test/setup/smtp-sink';

export interface SinkProcess {
  url: string;
  port: number;
  /** Messages received so far. */
  count(): Promise<number>;
  /** Waits until `n` messages were received in all. */
  waitFor(n: number, ms: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startSinkProcess(): Promise<SinkProcess> {
  const child = fork(__filename, ['--child'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { port: number }).port));
    child.once('exit', (code) => reject(new Error(`SMTP sink exited with ${code}`)));
  });
  const count = () =>
    new Promise<number>((resolve) => {
      child.once('message', (m) => resolve((m as { count: number }).count));
      child.send('count');
    });
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    count,
    async waitFor(n, ms) {
      const deadline = Date.now() + ms;
      for (let got = await count(); got < n; got = await count()) {
        if (Date.now() > deadline) throw new Error(`expected ${n} messages, got ${got}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      child.kill();
      await new Promise((r) => child.once('exit', r));
    },
  };
}

/** nodemailer alone, pooled and DKIM-signing as the service does, to the same listener: emails/s. */
export async function rawNodemailerRate(sink: SinkProcess, opts: { count: number; poolSize: number; concurrency: number; html: (i: number) => string }): Promise<number> {
  const dkim = {
    domainName: 'bench.test',
    keySelector: 'raw',
    privateKey: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
  const transport = createTransport({ pool: true, host: '127.0.0.1', port: sink.port, maxConnections: opts.poolSize, maxMessages: Infinity });
  const start = await sink.count();
  const t0 = Date.now();
  let next = 0;
  const worker = async () => {
    while (next < opts.count) {
      const i = next++;
      await transport.sendMail({ from: 'bench@bench.test', to: `raw${i}@example.org`, subject: 'Raw', html: opts.html(i), text: 'Raw.', dkim });
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  await sink.waitFor(start + opts.count, 600_000);
  transport.close();
  return opts.count / ((Date.now() - t0) / 1000);
}

async function child(): Promise<void> {
  const sink = new SmtpSink();
  sink.parse = false;
  let count = 0;
  // Count, keep nothing: memory stays flat however many messages arrive.
  sink.received.push = () => ++count;
  await sink.start();
  process.on('message', () => process.send!({ count }));
  process.send!({ port: sink.port });
}

if (process.argv.includes('--child')) void child();
