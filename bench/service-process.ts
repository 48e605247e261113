/** Shared by the benchmarks: the built service as a child process on a fresh DATA_DIR, and a tiny HTTP client. */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../src/db/embedded-postgres';
import { loadConfig } from '../src/config';
import { ZoneDnsServer } from '../src/dns/zone-server';
import { type SinkProcess, startSinkProcess } from './smtp-sink-process';

export interface ServiceProcess {
  port: number;
  child: ChildProcess;
  dataDir: string;
  stop(): Promise<void>;
}

export interface HttpResult {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

export function request(agent: http.Agent, port: number, method: string, p: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        agent,
        host: '127.0.0.1',
        port,
        method,
        path: p,
        headers: { ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers }));
      },
    );
    req.on('error', reject);
    if (payload) req.write(payload);
    req.end();
  });
}

/**
 * Starts the service as `npm start` does (`bin/postbox [role]`, on this process's Node) with embedded
 * defaults and the given settings; waits for /health (or, for a worker, a moment to connect). Pass
 * `dataDir` to join another process's cluster. BENCH_NODE_ARGS (`--flag=value` form) go to its node.
 */
export async function startServiceProcess(env: Record<string, string>, role?: string, joinDataDir?: string): Promise<ServiceProcess> {
  const dataDir = joinDataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-bench-'));
  const port = await freePort();
  const nodeArgs = process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(' ') : [];
  const child = spawn('sh', [path.join(__dirname, '../../bin/postbox'), ...nodeArgs, ...(role ? [role] : [])], {
    env: {
      ...process.env,
      PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      TEMPORAL_DEV_SERVER_PORT: String(await freePort()),
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      child.once('exit', () => {
        if (!joinDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
        resolve();
      });
      child.kill('SIGTERM');
    });
  if (role === 'worker') {
    await new Promise((r) => setTimeout(r, 5000));
    if (child.exitCode !== null) throw new Error('worker exited during start-up');
    return { port, child, dataDir, stop };
  }
  const agent = new http.Agent();
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error('service exited during start-up');
    const ok = await request(agent, port, 'GET', '/health').then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (i > 900) throw new Error('service did not become healthy');
    await new Promise((r) => setTimeout(r, 200));
  }
  return { port, child, dataDir, stop };
}

/** Signs up and creates a project; answers its keys and the session cookie. */
export async function createBenchProject(port: number): Promise<{ publicKey: string; secretKey: string; cookie: string; id: string }> {
  const agent = new http.Agent({ keepAlive: true });
  const signup = await request(agent, port, 'POST', '/auth/signup', { email: 'bench@example.com', password: 'bench password' });
  const cookie = String(signup.headers['set-cookie']?.[0] ?? '').split(';')[0];
  const project = JSON.parse((await request(agent, port, 'POST', '/users/@me/projects', { name: 'bench' }, { cookie })).body);
  agent.destroy();
  return { ...project, cookie };
}

/** Adds bench.test to the project, publishes its records on `dns` and verifies it: the benches' sender domain. */
export async function verifiedBenchDomain(
  agent: http.Agent,
  port: number,
  auth: Record<string, string>,
  dns: { add(name: string, type: 'TXT', value: string): unknown },
): Promise<void> {
  const domain = JSON.parse((await request(agent, port, 'POST', '/domains', { domain: 'bench.test' }, auth)).body);
  // The required records; a bench that wants per-message return paths publishes those itself (bench:inbound).
  for (const r of domain.records) if (r.type === 'TXT' && !r.purpose.startsWith('return-path')) dns.add(r.name, 'TXT', r.value);
  await request(agent, port, 'GET', `/domains/${domain.id}/verify`, undefined, auth);
}

export interface SendingBench {
  dns: ZoneDnsServer;
  sink: SinkProcess;
  service: ServiceProcess;
  project: { publicKey: string; secretKey: string; cookie: string; id: string };
  agent: http.Agent;
  auth: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * The service as one process delivering to smtp-sink, without a rate limit, and a bench project whose
 * sender domain bench.test is verified through a DNS server in this process; `agent` keeps up to
 * `connections` HTTP connections.
 */
export async function startSendingBench(env: Record<string, string>, connections: number): Promise<SendingBench> {
  const dns = await new ZoneDnsServer().start();
  const sink = await startSinkProcess();
  const service = await startServiceProcess({ SMTP_URL: sink.url, DNS_SERVERS: dns.address, RATE_LIMIT_PER_MINUTE: '100000000', ...env });
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const stop = async () => {
    agent.destroy();
    await service.stop();
    await sink.stop();
    await dns.stop();
  };
  try {
    const project = await createBenchProject(service.port);
    const auth = { authorization: `Bearer ${project.secretKey}` };
    await verifiedBenchDomain(agent, service.port, auth, dns);
    return { dns, sink, service, project, agent, auth, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The campaign benches' audience: `n` subscribed contacts user<i>@example.org with a name, analysed. */
export async function insertBenchAudience(db: { query(text: string, values?: unknown[]): Promise<unknown> }, projectId: string, n: number): Promise<void> {
  await db.query(
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT gen_random_uuid(), $1, 'user' || i || '@example.org', true, jsonb_build_object('name', 'User ' || i) FROM generate_series(1, $2) AS i`,
    [projectId, n],
  );
  await db.query('ANALYZE contacts');
}

/** How long `fn` takes, in milliseconds. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

/** The service's SMTP connections in the benches: its default, or SMTP_POOL_SIZE when set. */
export const SERVICE_SMTP_POOL = loadConfig({ SMTP_POOL_SIZE: process.env.SMTP_POOL_SIZE }).SMTP_POOL_SIZE;

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The median of the runs' ratios of `rate` to the baseline on the reference Node, when every run has it. */
export function medianReferenceRatio<R extends { reference?: number }>(rows: R[], rate: (row: R) => number): number | undefined {
  return rows.length && rows.every((r) => r.reference) ? median(rows.map((r) => rate(r) / r.reference!)) : undefined;
}
export const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

export function machine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

/** Peak and current resident memory of a process, from /proc (Linux). */
export function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
}

/** CPU seconds a process has used, all its threads (from /proc; Linux counts in ticks of 10 ms). */
export function cpuSecondsOf(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The message the /v1/send benches send: a 2.8 KB HTML body with a placeholder and a link. */
export const SEND_BODY = `<html><body><h1>Hello {{name ?? there}}</h1><p>${'Your weekly summary. '.repeat(40)}</p><a href="https://example.com/x">Open</a></body></html>`;

/** One single-recipient /v1/send request of those benches, to a new contact. */
export const sendRequest = (to: string, i: number) => ({
  to,
  from: 'Bench <hello@bench.test>',
  subject: 'Weekly summary for {{name}}',
  body: SEND_BODY,
  data: { name: `user ${i}` },
});

/** CPU seconds of every PostgreSQL process on the machine (a bench's cluster is the only one running). */
export function postgresCpuSeconds(): number {
  let seconds = 0;
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/stat`, 'utf8').includes('(postgres)')) seconds += cpuSecondsOf(Number(pid));
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return seconds;
}
