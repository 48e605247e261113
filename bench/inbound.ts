/**
 * Bounces in: how many delivery status notifications per second the inbound MX takes, each one a real
 * Postfix hard bounce (sisimai's lhost-postfix-04.eml) rewritten for an email the service sent, so each
 * is parsed, matched by its return path and recorded (email BOUNCED, `email.bounce`, the contact
 * unsubscribed) before its 250. Meanwhile GET /health is asked every 50 ms and its latency reported.
 * The baseline, in the same run: the same client sending the same reports to Postfix's smtp-sink (the
 * ceiling of the client and of SMTP on these cores). One `all` process, embedded defaults. The client
 * pipelines its commands, as MTAs do, in a few lines of socket code so that its own CPU stays small.
 *
 *   npm run bench:inbound                         # 5,000 reports, 16 connections, 3 runs
 *   BENCH_REPORTS=2000 BENCH_CONNECTIONS=8 BENCH_RUNS=1 npm run bench:inbound
 *   BENCH_RECEIVED=1 npm run bench:inbound        # replies to the inbound host instead of bounces
 *
 * With BENCH_RECEIVED=1 each message is instead a reader's reply to the email sent to them, from their address to
 * support@inbound.<domain> with the email's Message-ID in In-Reply-To: parsed, stored, linked to its email and
 * recorded as `email.received` before its 250 (a received message should cost no more than a bounce).
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import net from 'node:net';
import pg from 'pg';
import { loadConfig } from '../src/config';
import { embeddedDatabaseUrl, freePort } from '../src/db/embedded-postgres';
import { parseInboundReport } from '../src/inbound/bounce-report';
import { ReturnPaths } from '../src/mail/return-path';
import { cpuSecondsOf, machine, median, percentile, postgresCpuSeconds, request, sendRequest, startSendingBench, timed } from './service-process';
import { spawnSmtpSink } from './smtp-sink-process';

const REPORTS = Number(process.env.BENCH_REPORTS ?? 5000);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const SAMPLE = path.join(__dirname, '../../test/fixtures/bounces/lhost-postfix-04.eml');
const RECEIVED = process.env.BENCH_RECEIVED === '1';

/** A reader's reply to the email `emailId` sent from bench.test, as a mail client writes it. */
const replyFor = (from: string, emailId: string, n: number) =>
  [
    `From: Reader ${n} <${from}>`,
    'To: support@inbound.bench.test',
    `Subject: Re: Hello ${n}`,
    `Message-ID: <bench-reply-${n}-${Date.now()}@example.org>`,
    `In-Reply-To: <${emailId}@bench.test>`,
    `References: <${emailId}@bench.test>`,
    `Date: ${new Date().toUTCString()}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    `Thanks, that helps. Reader ${n}`,
    '',
    `> Hello ${n}`,
    '',
  ].join('\r\n');

/** The sample made to speak of `recipient`, with a Message-ID of its own (the MX takes each report once). */
function reportFor(template: string, theirs: string, recipient: string, n: number): string {
  return template
    .split(theirs)
    .join(recipient)
    .replace(/^Message-ID:.*$/im, `Message-ID: <bench-report-${n}-${Date.now()}@mta.bench>`);
}

/**
 * One SMTP session that sends report after report with PIPELINING (MAIL, RCPT and DATA in one write), as
 * an MTA delivering many reports to one MX does; a few lines of socket code, so the client's own CPU on
 * these shared cores stays small (nodemailer's cost about a millisecond a message).
 */
class PipelinedSession {
  private buffer = '';
  private waiters: Array<(line: string) => void> = [];
  private readonly socket: net.Socket;

  constructor(port: number) {
    this.socket = net.connect({ port, host: '127.0.0.1' });
    this.socket.setEncoding('latin1');
    // A sink stopped after its run resets what is left; nothing waits on it then.
    this.socket.on('error', () => undefined);
    this.socket.on('data', (d: string) => {
      this.buffer += d;
      let i: number;
      while ((i = this.buffer.indexOf('\r\n')) >= 0) {
        const line = this.buffer.slice(0, i);
        this.buffer = this.buffer.slice(i + 2);
        if (/^\d{3} /.test(line)) this.waiters.shift()?.(line);
      }
    });
  }

  private reply(): Promise<string> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private async expect(code: string): Promise<void> {
    const line = await this.reply();
    if (!line.startsWith(code)) throw new Error(`expected ${code}, got: ${line}`);
  }

  async open(): Promise<void> {
    await this.expect('220');
    this.socket.write('EHLO mta.bench\r\n');
    await this.expect('250');
  }

  /** One report (null sender) or message: `data` already CRLF-ended and dot-stuffed. */
  async send(to: string, data: string, from = ''): Promise<void> {
    const replies = [this.expect('250'), this.expect('250'), this.expect('354')];
    this.socket.write(`MAIL FROM:<${from}>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
    await Promise.all(replies);
    const done = this.expect('250');
    this.socket.write(`${data}.\r\n`);
    await done;
  }

  close(): void {
    this.socket.end('QUIT\r\n');
  }
}

/** The message as DATA sends it: CRLF line ends, leading dots doubled, ending in CRLF. */
const dataOf = (raw: string) =>
  `${raw
    .replace(/\r?\n/g, '\r\n')
    .replace(/^\./gm, '..')
    .replace(/(\r\n)?$/, '\r\n')}`;

/**
 * Messages per session before the client reconnects: the service's MX closes a session after
 * INBOUND_MAX_MESSAGES_PER_SESSION (421), and an MTA then opens another, so the client does the same to both.
 */
const PER_SESSION = loadConfig({}).INBOUND_MAX_MESSAGES_PER_SESSION;

/** Sends every report over CONNECTIONS sessions at a time, a new session every PER_SESSION messages; answers the milliseconds. */
async function sendReports(port: number, reports: Array<{ to: string; data: string; from?: string }>): Promise<number> {
  const open = async () => {
    const s = new PipelinedSession(port);
    await s.open();
    return s;
  };
  const sessions = await Promise.all(Array.from({ length: CONNECTIONS }, open));
  try {
    let next = 0;
    return await timed(() =>
      Promise.all(
        sessions.map(async (_, i) => {
          let sent = 0;
          while (next < reports.length) {
            const r = reports[next++];
            if (sent === PER_SESSION) {
              sessions[i].close();
              sessions[i] = await open();
              sent = 0;
            }
            await sessions[i].send(r.to, r.data, r.from);
            sent++;
          }
        }),
      ),
    );
  } finally {
    for (const s of sessions) s.close();
  }
}

/** GET /health every 50 ms until stopped: each answer's milliseconds, and how many failed. */
function watchHealth(port: number): { stop(): Promise<{ ms: number[]; failed: number }> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const ms: number[] = [];
  let failed = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const t = process.hrtime.bigint();
      const ok = await request(agent, port, 'GET', '/health').then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) ms.push(Number(process.hrtime.bigint() - t) / 1e6);
      else failed++;
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      agent.destroy();
      return { ms, failed };
    },
  };
}

async function run(index: number) {
  const mxPort = await freePort();
  // Every MTA here is this one process at one address: the per-client limits would count them as one client.
  const bench = await startSendingBench(
    {
      INBOUND_SMTP_PORT: String(mxPort),
      INBOUND_MAX_CONNECTIONS_PER_CLIENT: String(2 * CONNECTIONS),
      INBOUND_REPORTS_PER_CLIENT_PER_HOUR: String(100 * REPORTS),
    },
    32,
  );
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(bench.service.dataDir) });
  try {
    await db.connect();
    // The return path, published and checked, so the service's mail carries it.
    const domain = JSON.parse((await request(bench.agent, bench.service.port, 'GET', '/domains/project/' + bench.project.id, undefined, bench.auth)).body)[0];
    for (const r of domain.records) {
      if (r.purpose === 'return-path') bench.dns.add(r.name, 'MX', { exchange: r.value, priority: r.priority });
      if (r.purpose === 'return-path-spf') bench.dns.add(r.name, 'TXT', r.value);
    }
    await request(bench.agent, bench.service.port, 'GET', `/domains/${domain.id}/verify`, undefined, bench.auth);

    // The emails the reports are about: sent first, and delivered, untimed.
    const sent: Array<{ email: string; to: string }> = [];
    let i = 0;
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (i < REPORTS) {
          const n = i++;
          const to = `reader${n}-${index}@example.org`;
          const res = await request(bench.agent, bench.service.port, 'POST', '/v1/send', { ...sendRequest(to, n), subscribed: true }, bench.auth);
          if (res.status !== 200) throw new Error(`send answered ${res.status}: ${res.body}`);
          sent.push({ email: JSON.parse(res.body).data.emails[0].email, to });
        }
      }),
    );
    await bench.sink.waitFor(REPORTS, 300_000);

    const secret = fs.readFileSync(path.join(bench.service.dataDir, 'jwt-secret'), 'utf8').trim();
    const paths = new ReturnPaths(secret, 'bounces');
    const template = fs.readFileSync(SAMPLE, 'latin1');
    const sample = await parseInboundReport(Buffer.from(template, 'latin1'));
    const theirs = sample.kind === 'bounce' ? sample.recipients[0].recipient! : '';
    const reports = RECEIVED
      ? sent.map((s, n) => ({ to: 'support@inbound.bench.test', from: s.to, data: dataOf(replyFor(s.to, s.email, n)) }))
      : sent.map((s, n) => ({ to: paths.address(s.email, 'bench.test'), data: dataOf(reportFor(template, theirs, s.to, n)) }));

    // The ceiling of this client and of SMTP alone: the same reports to smtp-sink.
    const sink = await spawnSmtpSink([]);
    const baselineMs = await sendReports(sink.port, reports).finally(() => sink.child.kill());

    const health = watchHealth(bench.service.port);
    const cpu0 = { service: cpuSecondsOf(bench.service.child.pid!), postgres: postgresCpuSeconds(), client: process.cpuUsage() };
    const ms = await sendReports(mxPort, reports);
    const client = process.cpuUsage(cpu0.client);
    const cpu = {
      serviceMs: ((cpuSecondsOf(bench.service.child.pid!) - cpu0.service) / REPORTS) * 1000,
      postgresMs: ((postgresCpuSeconds() - cpu0.postgres) / REPORTS) * 1000,
      clientMs: (client.user + client.system) / 1000 / REPORTS,
    };
    const watched = await health.stop();
    const [{ bounced }] = (await db.query(`SELECT count(*)::int AS bounced FROM emails WHERE status = 'BOUNCED'`)).rows;
    const [{ unsubscribed }] = (await db.query(`SELECT count(*)::int AS unsubscribed FROM contacts WHERE NOT subscribed AND email LIKE 'reader%'`)).rows;
    const [{ linked }] = (await db.query(`SELECT count(*)::int AS linked FROM inbound_emails WHERE email_id IS NOT NULL`)).rows;
    const sorted = [...watched.ms].sort((a, b) => a - b);
    return {
      rate: (REPORTS / ms) * 1000,
      baseline: (REPORTS / baselineMs) * 1000,
      bounced,
      unsubscribed,
      linked,
      healthP50: percentile(sorted, 50),
      healthP99: percentile(sorted, 99),
      healthFailed: watched.failed,
      cpu,
      parseUs: await timed(async () => {
        for (let k = 0; k < 500; k++) await parseInboundReport(Buffer.from(reports[k % reports.length].data, 'latin1'));
      }).then((t) => (t / 500) * 1000),
    };
  } finally {
    await db.end().catch(() => undefined);
    await bench.stop();
  }
}

async function main(): Promise<void> {
  const what = RECEIVED ? 'replies to the inbound host' : 'hard bounces';
  const unit = RECEIVED ? 'messages' : 'reports';
  console.log(`bench:inbound — ${REPORTS} ${what} over ${CONNECTIONS} SMTP connections, ${RUNS} run(s); ${machine()}`);
  const rows = [];
  for (let r = 0; r < RUNS; r++) {
    const row = await run(r);
    rows.push(row);
    console.log(
      `run ${r + 1}: ${row.rate.toFixed(0)} ${unit}/s (baseline, smtp-sink: ${row.baseline.toFixed(0)}/s, ratio ${(row.rate / row.baseline).toFixed(2)}); ` +
        (RECEIVED ? `stored and linked ${row.linked}` : `BOUNCED ${row.bounced}, unsubscribed ${row.unsubscribed}`) +
        `; /health p50 ${row.healthP50.toFixed(1)} ms, p99 ${row.healthP99.toFixed(1)} ms, ` +
        `failed ${row.healthFailed}; parsing alone ${row.parseUs.toFixed(0)} µs a report; CPU a report: service ${row.cpu.serviceMs.toFixed(2)} ms, ` +
        `PostgreSQL ${row.cpu.postgresMs.toFixed(2)} ms, this client ${row.cpu.clientMs.toFixed(2)} ms`,
    );
    if (RECEIVED && row.linked !== REPORTS) throw new Error(`expected ${REPORTS} replies stored and linked`);
    if (!RECEIVED && (row.bounced !== REPORTS || row.unsubscribed !== REPORTS)) throw new Error(`expected ${REPORTS} bounced and unsubscribed`);
  }
  const rate = median(rows.map((r) => r.rate));
  console.log(`median: ${rate.toFixed(0)} ${unit}/s (goal ≥ 500), ${median(rows.map((r) => r.rate / r.baseline)).toFixed(2)}× the smtp-sink baseline`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
