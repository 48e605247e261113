/**
 * What a crash costs: the service (one `all` process on embedded defaults) or its embedded PostgreSQL
 * is killed with SIGKILL in the middle of a campaign and of `/v1/send` load, and every message that
 * reaches Postfix's `smtp-sink` is counted by recipient. Per run: messages lost (accepted, never
 * delivered), duplicates, and the time from the kill until the service answers again and until the
 * last recipient is delivered.
 *
 *   npm run bench:crash                                      # 3 runs of each of the four cases
 *   BENCH_RUNS=1 BENCH_CAMPAIGN=5000 BENCH_SENDS=1000 npm run bench:crash
 *   BENCH_TARGETS=service BENCH_LOADS=send npm run bench:crash    # one case
 *
 * Needs `smtp-sink` (Debian package postfix) on PATH or in /usr/sbin.
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { embeddedDatabaseUrl, freePort } from '../src/db/embedded-postgres';
import { ZoneDnsServer } from '../src/dns/zone-server';
import {
  createBenchProject,
  machine,
  median,
  request,
  SERVICE_SMTP_POOL,
  type ServiceProcess,
  startServiceProcess,
  verifiedBenchDomain,
} from './service-process';
import { spawnSmtpSink } from './smtp-sink-process';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const CAMPAIGN = Number(process.env.BENCH_CAMPAIGN ?? 20_000);
const SENDS = Number(process.env.BENCH_SENDS ?? 2_000);
const CONCURRENCY = 32;
/** The kill comes when this share of the mail has arrived. */
const KILL_AT = 0.3;
/** BENCH_TARGETS=service,postgres and BENCH_LOADS=campaign,send choose the cases (default: all four). */
const TARGETS = (process.env.BENCH_TARGETS ?? 'service,postgres').split(',') as Array<'service' | 'postgres'>;
const LOADS = (process.env.BENCH_LOADS ?? 'campaign,send').split(',');

/**
 * Postfix's smtp-sink appending every transaction to one dump file; recipients are read from the
 * `X-Rcpt-Args` lines it writes, incrementally, so counting stays cheap however big the file grows.
 */
class CountingSink {
  private child?: ChildProcess;
  private offset = 0;
  private rest = '';
  readonly perRecipient = new Map<string, number>();
  lastNewAt = 0;
  /** When each first delivery of a recipient arrived (as read by poll, every 100 ms). */
  readonly firstDeliveries: number[] = [];
  port = 0;
  private readonly file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'crash-sink-')), 'dump');

  async start(): Promise<this> {
    const { child, port } = await spawnSmtpSink(['-D', this.file]);
    this.child = child;
    this.port = port;
    return this;
  }

  /** Reads what arrived since the last call. */
  poll(): void {
    if (!fs.existsSync(this.file)) return;
    const size = fs.statSync(this.file).size;
    if (size <= this.offset) return;
    const fd = fs.openSync(this.file, 'r');
    const chunk = Buffer.alloc(size - this.offset);
    fs.readSync(fd, chunk, 0, chunk.length, this.offset);
    fs.closeSync(fd);
    this.offset = size;
    const text = this.rest + chunk.toString('latin1');
    const cut = text.lastIndexOf('X-Rcpt-Args:');
    // The last match may be cut in half: it is read again with the next chunk.
    const done = cut === -1 ? text : text.slice(0, cut);
    this.rest = cut === -1 ? '' : text.slice(cut);
    for (const m of done.matchAll(/X-Rcpt-Args: <([^>]+)>/g)) this.count(m[1]);
    const whole = /^X-Rcpt-Args: <([^>]+)>[\s\S]*\n/.exec(this.rest);
    if (whole) {
      this.count(whole[1]);
      this.rest = this.rest.slice(whole[0].length);
    }
  }

  private count(rcpt: string): void {
    const n = this.perRecipient.get(rcpt) ?? 0;
    if (n === 0) {
      this.lastNewAt = Date.now();
      this.firstDeliveries.push(this.lastNewAt);
    }
    this.perRecipient.set(rcpt, n + 1);
  }

  stop(): void {
    this.child?.kill();
  }
}

/** The longest stretch after `from` with no new recipient delivered: how long the takeover took. */
function longestGap(times: number[], from: number): number {
  let gap = 0;
  let prev = from;
  for (const t of times) {
    if (t < from) continue;
    gap = Math.max(gap, t - prev);
    prev = t;
  }
  return gap;
}

interface Outcome {
  /** The longest pause in deliveries after the kill. */
  stallMs: number;
  lost: number;
  duplicates: number;
  deliveredAtKill: number;
  backMs: number;
  completeMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, ms: number, probe: () => Promise<boolean> | boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

const postmasterPid = (dataDir: string) => Number(fs.readFileSync(path.join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);

async function healthy(port: number): Promise<boolean> {
  const agent = new http.Agent();
  const res = await request(agent, port, 'GET', '/health').catch(() => undefined);
  agent.destroy();
  return res?.status === 200;
}

/** The service as one `all` process; a kill of it is followed by a start on the same DATA_DIR (and dev server port). */
class Service {
  proc!: ServiceProcess;
  dataDir?: string;
  constructor(private readonly env: Record<string, string>) {}
  async start(): Promise<void> {
    this.proc = await startServiceProcess(this.env, undefined, this.dataDir);
    this.dataDir ??= this.proc.dataDir;
  }
  get port(): number {
    return this.proc.port;
  }
  async kill(): Promise<void> {
    const exited = new Promise((r) => this.proc.child.once('exit', r));
    this.proc.child.kill('SIGKILL');
    await exited;
  }
}

async function main(): Promise<void> {
  const dns = await new ZoneDnsServer().start();
  const sink = await new CountingSink().start();
  const poller = setInterval(() => sink.poll(), 100);
  const env = {
    SMTP_URL: `smtp://127.0.0.1:${sink.port}`,
    DNS_SERVERS: dns.address,
    RATE_LIMIT_PER_MINUTE: '100000000',
    SMTP_POOL_SIZE: String(SERVICE_SMTP_POOL),
    TEMPORAL_DEV_SERVER_PORT: String(await freePort()),
    TEMPORAL_UI: 'off',
    JWT_SECRET: 'bench secret that survives restarts',
  };
  const svc = new Service(env);
  await svc.start();
  const project = await createBenchProject(svc.port);
  const auth = { authorization: `Bearer ${project.secretKey}` };
  {
    const agent = new http.Agent();
    await verifiedBenchDomain(agent, svc.port, auth, dns);
    agent.destroy();
  }
  /** One statement on its own connection: a connection kept open would die with a killed postmaster. */
  async function dbQuery(text: string, params: unknown[]): Promise<void> {
    const db = new pg.Client({ connectionString: embeddedDatabaseUrl(svc.dataDir!) });
    await db.connect();
    try {
      await db.query(text, params);
    } finally {
      await db.end().catch(() => {});
    }
  }

  /** Kills what `target` names once `killWhen` holds; answers when the service is healthy again. */
  async function crash(target: 'service' | 'postgres'): Promise<number> {
    const t0 = Date.now();
    if (target === 'service') {
      await svc.kill();
      await svc.start();
    } else {
      process.kill(postmasterPid(svc.dataDir!), 'SIGKILL');
      await sleep(200);
      await until('the service to be healthy again', 120_000, () => healthy(svc.port));
    }
    return Date.now() - t0;
  }

  async function campaignRun(target: 'service' | 'postgres', run: number): Promise<Outcome> {
    const domainPart = `c${target[0]}${run}.example.org`;
    await dbQuery(
      `INSERT INTO contacts (id, project_id, email, subscribed, data)
       SELECT gen_random_uuid(), $1, 'user' || i || '@' || $3, true, jsonb_build_object('n', i) FROM generate_series(1, $2) AS i`,
      [project.id, CAMPAIGN, domainPart],
    );
    const agent = new http.Agent({ keepAlive: true });
    const body = `<html><body><p>${'News of the month. '.repeat(60)}</p><a href="https://example.com/x">Read</a></body></html>`;
    const c = JSON.parse(
      (
        await request(
          agent,
          svc.port,
          'POST',
          '/campaigns',
          {
            name: `Crash ${target} ${run}`,
            subject: 'News {{n}}',
            body,
            from: 'news@bench.test',
            audienceType: 'SEGMENT',
            segmentId: await segmentOf(domainPart),
          },
          auth,
        )
      ).body,
    ).data;
    const sent = await request(agent, svc.port, 'POST', `/campaigns/${c.id}/send`, {}, auth);
    if (sent.status !== 200) throw new Error(sent.body);
    agent.destroy();
    const suffix = `@${domainPart}`;
    const delivered = () => [...sink.perRecipient.keys()].filter((k) => k.endsWith(suffix)).length;
    await until('the kill point', 600_000, () => delivered() >= CAMPAIGN * KILL_AT);
    const deliveredAtKill = delivered();
    const killedAt = Date.now();
    const backMs = await crash(target);
    await until('every recipient', 900_000, () => delivered() === CAMPAIGN);
    await sleep(3000); // duplicates still on their way
    sink.poll();
    let duplicates = 0;
    for (const [k, v] of sink.perRecipient) if (k.endsWith(suffix)) duplicates += v - 1;
    return {
      lost: CAMPAIGN - delivered(),
      duplicates,
      deliveredAtKill,
      backMs,
      completeMs: sink.lastNewAt - killedAt,
      stallMs: longestGap(sink.firstDeliveries, killedAt),
    };
  }

  /** A DYNAMIC segment of one run's contacts (by their address's domain), so each run has its own audience. */
  async function segmentOf(domainPart: string): Promise<string> {
    const agent = new http.Agent();
    const res = await request(
      agent,
      svc.port,
      'POST',
      '/segments',
      { name: domainPart, condition: { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value: `@${domainPart}` }] }] } },
      auth,
    );
    agent.destroy();
    if (res.status !== 201) throw new Error(res.body);
    return JSON.parse(res.body).id;
  }

  async function sendRun(target: 'service' | 'postgres', run: number): Promise<Outcome> {
    const suffix = `@s${target[0]}${run}.example.org`;
    const accepted = new Set<number>();
    let next = 0;
    let killing: Promise<number> | undefined;
    let killedAt = 0;
    let deliveredAtKill = 0;
    const delivered = () => [...sink.perRecipient.keys()].filter((k) => k.endsWith(suffix)).length;
    const client = async () => {
      const agent = new http.Agent({ keepAlive: true });
      while (next < SENDS) {
        const i = next++;
        // A real client retries what got no answer, with the same Idempotency-Key, until it is accepted.
        for (;;) {
          const res = await request(
            agent,
            svc.port,
            'POST',
            '/v1/send',
            { to: `r${i}${suffix}`, from: 'hi@bench.test', subject: `Receipt ${i}`, body: `<p>Thanks for order ${i}.</p>` },
            { ...auth, 'idempotency-key': `crash-${suffix}-${i}` },
          ).catch(() => undefined);
          if (res?.status === 200) break;
          // Already accepted by an earlier try whose answer was lost; `null` is a try cut by the kill,
          // taken over once its claim is abandoned (Retry-After says when).
          if (res?.status === 409 && JSON.parse(res.body).error?.details?.originalStatusCode === 200) break;
          await sleep(res?.status === 409 ? 1000 : 200);
        }
        accepted.add(i);
        if (!killing && accepted.size >= SENDS * KILL_AT) {
          deliveredAtKill = delivered();
          killedAt = Date.now();
          killing = crash(target);
        }
      }
      agent.destroy();
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, client));
    const backMs = await killing!;
    await until('every accepted email', 900_000, () => delivered() === accepted.size);
    await sleep(3000);
    sink.poll();
    let duplicates = 0;
    for (const [k, v] of sink.perRecipient) if (k.endsWith(suffix)) duplicates += v - 1;
    return {
      lost: accepted.size - delivered(),
      duplicates,
      deliveredAtKill,
      backMs,
      completeMs: sink.lastNewAt - killedAt,
      stallMs: longestGap(sink.firstDeliveries, killedAt),
    };
  }

  console.log(
    `crash bench: campaign of ${CAMPAIGN}, ${SENDS} /v1/send at ${CONCURRENCY} concurrent, SMTP pool ${SERVICE_SMTP_POOL}, ` +
      `kill at ${KILL_AT * 100}% delivered, ${RUNS} run(s) each`,
  );
  console.log(`machine: ${machine()}`);
  try {
    for (const target of TARGETS) {
      for (const [load, runOnce] of [
        ['campaign', campaignRun],
        ['/v1/send', sendRun],
      ] as const) {
        if (!LOADS.includes(load.replace('/v1/', ''))) continue;
        const outcomes: Outcome[] = [];
        for (let run = 1; run <= RUNS; run++) {
          const o = await runOnce(target, run);
          outcomes.push(o);
          console.log(
            `  kill ${target} during ${load}, run ${run}: ${o.deliveredAtKill} delivered at the kill; lost ${o.lost}, duplicates ${o.duplicates}; ` +
              `answering again after ${(o.backMs / 1000).toFixed(1)} s, ` +
              `deliveries paused ${(o.stallMs / 1000).toFixed(1)} s at most, last recipient ${(o.completeMs / 1000).toFixed(1)} s after the kill`,
          );
        }
        const m = (f: (o: Outcome) => number) => median(outcomes.map(f));
        console.log(
          `kill ${target} during ${load}: median lost ${m((o) => o.lost)}, ` +
            `duplicates ${m((o) => o.duplicates)} (max ${Math.max(...outcomes.map((o) => o.duplicates))}), ` +
            `answering after ${(m((o) => o.backMs) / 1000).toFixed(1)} s, ` +
            `longest pause in deliveries ${(m((o) => o.stallMs) / 1000).toFixed(1)} s, ` +
            `complete ${(m((o) => o.completeMs) / 1000).toFixed(1)} s after the kill`,
        );
      }
    }
  } finally {
    clearInterval(poller);
    await svc.proc.stop();
    sink.stop();
    await dns.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
