/**
 * The benchmarks' SMTP listener: Postfix's `smtp-sink` (Debian package postfix), a C sink that costs
 * almost no CPU, so on two cores the figures measure the sender and not the listener (a Node
 * `smtp-server` on the same cores costs about as much as the sender). It counts messages and drops
 * them. And the baseline every delivery figure is a ratio to: nodemailer alone, sending the same
 * message to the same sink in the same run.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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

/** The baseline's message, as plain data, so that a reference run on another Node sends the very same. */
export interface BaselineSpec {
  /** The body template, rendered with `{ name: namePrefix + i }` for the i-th message. */
  body: string;
  namePrefix: string;
  from: string;
  subject: string;
}

/** The baseline's connections: a fixed reference (docs/performance.md, the baseline), whatever the service's own SMTP_POOL_SIZE. */
export const BASELINE_CONNECTIONS = 8;

export interface BaselineRun {
  count: number;
  /** Messages sent first and not timed: the sender's JIT warm and its connections open, as the service's are. */
  warmup?: number;
  poolSize: number;
  concurrency: number;
  spec: BaselineSpec;
}

/**
 * The fixed reference: nodemailer's pooled transport signing with its own DKIM, the key given as a PEM
 * string, `poolSize` connections, the message the service sends (its text part made as the service
 * makes it), to the sink on `port`. `run` sends `count` messages (or `n`), `concurrency` at a time,
 * and resolves when the sink has accepted the last one.
 */
export function baselineSender(port: number, opts: BaselineRun) {
  const { body, namePrefix, from, subject } = opts.spec;
  const text = htmlToTextTemplate(body) ?? '';
  const dkim = {
    domainName: 'bench.test',
    keySelector: 'raw',
    privateKey: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
  const transport = createTransport({ pool: true, host: '127.0.0.1', port, maxConnections: opts.poolSize, maxMessages: Infinity });
  return {
    async run(n = opts.count): Promise<void> {
      let next = 0;
      const worker = async () => {
        while (next < n) {
          const i = next++;
          const values = { name: `${namePrefix}${i}` };
          await transport.sendMail({ from, to: `raw${i}@example.org`, subject, html: render(body, values, 'html'), text: render(text, values, 'text'), dkim });
        }
      };
      await Promise.all(Array.from({ length: opts.concurrency }, worker));
    },
    close: () => transport.close(),
  };
}

/**
 * The baseline's rate in emails/s, received by `sink`. With `node`, it runs on that Node binary (see
 * `referenceNode`) in a process of its own, timed from when it is ready to send.
 */
export async function rawNodemailerRate(sink: SinkProcess, opts: BaselineRun & { node?: string }): Promise<number> {
  if (!opts.node) {
    const sender = baselineSender(sink.port, opts);
    if (opts.warmup) await sender.run(opts.warmup);
    const start = await sink.count();
    const t0 = Date.now();
    await sender.run();
    await sink.waitFor(start + opts.count, 600_000);
    sender.close();
    return opts.count / ((Date.now() - t0) / 1000);
  }
  const { node, ...rest } = opts;
  const child = spawn(node, [path.join(__dirname, 'reference-sender.js'), JSON.stringify({ port: sink.port, ...rest })], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    void exited.then((code) => reject(new Error(`the reference sender on ${node} exited (${code}) before it was ready`)));
  });
  const start = await sink.count();
  const t0 = Date.now();
  child.stdin!.end('go\n');
  await sink.waitFor(start + opts.count, 600_000);
  const rate = opts.count / ((Date.now() - t0) / 1000);
  if ((await exited) !== 0) throw new Error(`the reference sender on ${node} failed`);
  return rate;
}

/**
 * An older Node to run the baseline on as well: the issue measured its baseline on the machine's Node
 * 20, where nodemailer's PEM path is much slower than on the service's Node 24 (OpenSSL 3.5), so the
 * same-run baseline moved with the runtime. BENCH_REFERENCE_NODE names the binary (`off`: none);
 * unset, the first `node` on PATH outside node_modules whose major version is older than this one.
 */
export function referenceNode(): { path: string; version: string } | undefined {
  const given = process.env.BENCH_REFERENCE_NODE;
  if (given === 'off') return undefined;
  const major = (v: string) => Number(/^v(\d+)/.exec(v)?.[1] ?? 0);
  const candidates = given
    ? [given]
    : (process.env.PATH ?? '')
        .split(path.delimiter)
        .filter((d) => d && !d.includes('node_modules'))
        .map((d) => path.join(d, 'node'));
  for (const candidate of candidates) {
    if (!fs.existsSync(candidate)) continue;
    const version = execFileSync(candidate, ['--version']).toString().trim();
    if (given || major(version) < major(process.version)) return { path: candidate, version };
  }
  return undefined;
}

/**
 * The baseline on the reference Node (`referenceNode`), as both delivery benches run and print it; with
 * no older Node on the machine every part is empty and nothing runs.
 */
export function referenceBaseline() {
  const node = referenceNode();
  return {
    /** For the bench's machine line. */
    note: node ? `; the baseline also runs on ${node.path} (${node.version}), the issue's reference` : '',
    rate: (sink: SinkProcess, opts: BaselineRun) => (node ? rawNodemailerRate(sink, { ...opts, node: node.path }) : Promise.resolve(undefined)),
    /** A run's rate against the reference's rate in the same run. */
    figure: (rate: number, reference: number | undefined) =>
      node && reference ? `on ${node.version} ${reference.toFixed(0)} emails/s (${(rate / reference).toFixed(2)}x), ` : '',
    /** The median of the runs' ratios to it, for the median line. */
    median: (ratio: number | undefined) => (node && ratio ? ` and ${ratio.toFixed(2)}x the baseline on ${node.version}` : ''),
  };
}
