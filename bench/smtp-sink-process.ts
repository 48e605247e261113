/**
 * The benchmarks' SMTP listener: Postfix's `smtp-sink` (Debian package postfix), a C sink that costs
 * almost no CPU, so on two cores the figures measure the sender and not the listener (a Node
 * `smtp-server` on the same cores costs about as much as the sender). It counts messages and drops
 * them. And the baseline every delivery figure is a ratio to: nodemailer alone, sending the same
 * message to the same sink in the same run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { createTransport } from 'nodemailer';
import { freePort } from '../src/db/embedded-postgres';
import { render } from '../src/mail/render';
import { htmlToTextTemplate } from '../src/mail/text';

export interface SinkProcess {
  url: string;
  port: number;
  /** Messages received so far. */
  count(): Promise<number>;
  /** Waits until `n` messages were received in all. */
  waitFor(n: number, ms: number): Promise<void>;
  stop(): Promise<void>;
}

/** Starts `smtp-sink` on a free loopback port with `args` before the address (for example `-D file`). */
export async function spawnSmtpSink(args: string[], stdout: 'inherit' | 'pipe' = 'inherit'): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const bin = fs.existsSync('/usr/sbin/smtp-sink') ? '/usr/sbin/smtp-sink' : 'smtp-sink';
  const child = spawn(bin, ['-u', os.userInfo().username, ...args, `127.0.0.1:${port}`, '512'], { stdio: ['ignore', stdout, 'inherit'] });
  await new Promise((r) => setTimeout(r, 300));
  if (child.exitCode !== null || child.pid === undefined) throw new Error('smtp-sink did not start (install the postfix package)');
  return { child, port };
}

/** smtp-sink with `-c`: it writes `sess=… quit=… mesg=N\r` on stdout after every message; the last N is the count. */
export async function startSinkProcess(): Promise<SinkProcess> {
  const { child, port } = await spawnSmtpSink(['-c'], 'pipe');
  let received = 0;
  let tail = '';
  child.stdout!.setEncoding('latin1');
  child.stdout!.on('data', (chunk: string) => {
    const text = tail + chunk;
    const end = text.lastIndexOf('\r');
    if (end === -1) return void (tail = text);
    const at = text.lastIndexOf('mesg=', end);
    if (at !== -1) received = Number(text.slice(at + 'mesg='.length, end));
    tail = text.slice(end + 1);
  });
  const count = async () => received;
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    count,
    async waitFor(n, ms) {
      const deadline = Date.now() + ms;
      while (received < n) {
        if (Date.now() > deadline) throw new Error(`expected ${n} messages, got ${received}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async stop() {
      child.kill();
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    },
  };
}

export interface BaselineMessage {
  from: string;
  subject: string;
  html: (i: number) => string;
  text: (i: number) => string;
}

/**
 * The message a bench's service sends, for the baseline: `body` rendered with `{ name: name(i) }`,
 * its text part made as the service makes it (the body's text template, rendered the same way).
 */
export function baselineMessage(body: string, from: string, subject: string, name: (i: number) => string): BaselineMessage {
  const text = htmlToTextTemplate(body) ?? '';
  return { from, subject, html: (i) => render(body, { name: name(i) }, 'html'), text: (i) => render(text, { name: name(i) }, 'text') };
}

/**
 * The fixed reference: nodemailer's pooled transport signing with its own DKIM, the key given as a PEM
 * string, 8 connections (`poolSize`), the same message the service sends, to the same sink: emails/s.
 */
export async function rawNodemailerRate(sink: SinkProcess, opts: { count: number; poolSize: number; concurrency: number; message: BaselineMessage }): Promise<number> {
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
      const { from, subject } = opts.message;
      await transport.sendMail({ from, to: `raw${i}@example.org`, subject, html: opts.message.html(i), text: opts.message.text(i), dkim });
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  await sink.waitFor(start + opts.count, 600_000);
  transport.close();
  return opts.count / ((Date.now() - t0) / 1000);
}
