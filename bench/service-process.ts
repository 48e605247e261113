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
export async function startServiceProcess(
  env: Record<string, string>,
  role?: string,
  joinDataDir?: string,
  output: 'inherit' | number = 'inherit',
): Promise<ServiceProcess> {
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
      // Every bench's load comes from one address: the public key's per-client budget is for the web.
      PUBLIC_RATE_LIMIT_PER_MINUTE: '100000000',
      PUBLIC_RATE_LIMIT_PER_CLIENT_PER_MINUTE: '100000000',
      ...env,
    },
    stdio: ['ignore', output, output],
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      child.once('exit', () => {
        if (!joinDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
        resolve();
      });
      child.kill('SIGTERM');
    });
  // A start that fails leaves no process and, unless it joined another's, no DATA_DIR behind.
  const abandon = async (reason: string): Promise<never> => {
    if (child.exitCode === null && child.signalCode === null) await stop();
    else if (!joinDataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    throw new Error(reason);
  };
  if (role === 'worker') {
    await new Promise((r) => setTimeout(r, 5000));
    if (child.exitCode !== null) return abandon('worker exited during start-up');
    return { port, child, dataDir, stop };
  }
  const agent = new http.Agent();
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) return abandon('service exited during start-up');
    const ok = await request(agent, port, 'GET', '/health').then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (i > 900) return abandon('service did not become healthy');
    await new Promise((r) => setTimeout(r, 200));
  }
  return { port, child, dataDir, stop };
}

/** How the service runs: one `all` process as `npm start` does, or an `api` process and a `worker` process joining its DATA_DIR. */
export type Layout = 'all' | 'split';

export interface ServiceLayout {
  /** The process that answers HTTP. */
  api: ServiceProcess;
  /** The process that delivers (the same as `api` in the `all` layout). */
  worker: ServiceProcess;
  /** Every process of the service, once each. */
  processes: ServiceProcess[];
  /** The Temporal dev server's address, for a client of the bench's own. */
  temporalAddress: string;
  stop(): Promise<void>;
}

/**
 * Starts the service in `layout`; in `split` the worker joins the API's embedded PostgreSQL and
 * Temporal dev server. `output` (a file descriptor) takes the processes' logs instead of this one's.
 */
export async function startServiceLayout(env: Record<string, string>, layout: Layout, output: 'inherit' | number = 'inherit'): Promise<ServiceLayout> {
  const temporalPort = await freePort();
  const settings = { TEMPORAL_DEV_SERVER_PORT: String(temporalPort), ...env };
  const temporalAddress = `127.0.0.1:${temporalPort}`;
  if (layout === 'all') {
    const service = await startServiceProcess(settings, undefined, undefined, output);
    return { api: service, worker: service, processes: [service], temporalAddress, stop: service.stop };
  }
  // Both processes sign and check the same session tokens.
  const shared = { JWT_SECRET: 'bench secret shared by the api and the worker', ...settings };
  const api = await startServiceProcess(shared, 'api', undefined, output);
  try {
    const worker = await startServiceProcess(shared, 'worker', api.dataDir, output);
    const stop = async () => {
      await worker.stop();
      await api.stop();
    };
    return { api, worker, processes: [api, worker], temporalAddress, stop };
  } catch (err) {
    await api.stop();
    throw err;
  }
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
  /** The process that answers HTTP. */
  service: ServiceProcess;
  layout: ServiceLayout;
  project: { publicKey: string; secretKey: string; cookie: string; id: string };
  agent: http.Agent;
  auth: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * The service (one process, or as `layout` says) delivering to smtp-sink, without a rate limit, and a
 * bench project whose sender domain bench.test is verified through a DNS server in this process;
 * `agent` keeps up to `connections` HTTP connections.
 */
export async function startSendingBench(
  env: Record<string, string>,
  connections: number,
  layout: Layout = 'all',
  output: 'inherit' | number = 'inherit',
): Promise<SendingBench> {
  const dns = await new ZoneDnsServer().start();
  const sink = await startSinkProcess();
  const service = await startServiceLayout({ SMTP_URL: sink.url, DNS_SERVERS: dns.address, RATE_LIMIT_PER_MINUTE: '100000000', ...env }, layout, output).catch(
    async (err: unknown) => {
      await sink.stop();
      await dns.stop();
      throw err;
    },
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const stop = async () => {
    agent.destroy();
    await service.stop();
    await sink.stop();
    await dns.stop();
  };
  try {
    const project = await createBenchProject(service.api.port);
    const auth = { authorization: `Bearer ${project.secretKey}` };
    await verifiedBenchDomain(agent, service.api.port, auth, dns);
    return { dns, sink, service: service.api, layout: service, project, agent, auth, stop };
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

/** The campaign benches' message: a 2.8 KB HTML body with a placeholder and a link. */
export const CAMPAIGN_BODY =
  `<html><body><h1>Hello {{name ?? there}}</h1>` + `<p>${'This month in review. '.repeat(40)}</p>` + `<a href="https://example.com/x">Read</a></body></html>`;

/**
 * The same message with logic: a loop of 10 items and three conditionals, rendered per recipient from
 * the same contact data (the loop is over a range, so the audience stays as it is).
 */
export const CAMPAIGN_LIQUID_BODY =
  `<html><body><h1>Hello {{ name | default: "there" }}</h1>` +
  `<p>${'This month in review. '.repeat(40)}</p>` +
  `<ul>{% for i in (1..10) %}<li>{% if forloop.first %}New: {% endif %}{{ name }}, item {{ i }}` +
  `{% if name contains "7" %} (lucky){% endif %}{% unless forloop.last %};{% endunless %}</li>{% endfor %}</ul>` +
  `<a href="https://example.com/x">Read</a></body></html>`;

/** Which message the campaign benches send: BENCH_TEMPLATE=var (the default, `{{var}}` placeholders) or liquid. */
export type BenchTemplate = 'var' | 'liquid';
export const benchTemplates: Record<BenchTemplate, { subject: string; body: string }> = {
  var: { subject: 'News for {{name}}', body: CAMPAIGN_BODY },
  liquid: { subject: '{% if name contains "1" %}News for {{ name }}{% else %}News{% endif %}', body: CAMPAIGN_LIQUID_BODY },
};

/**
 * The message of run `run`: BENCH_TEMPLATE=var (default) or liquid for every run, or alternate (var on
 * odd runs, liquid on even ones) to compare the two in the same, interleaved runs.
 */
export function benchTemplateOf(run: number): BenchTemplate {
  const choice = process.env.BENCH_TEMPLATE ?? 'var';
  if (choice === 'alternate') return run % 2 === 1 ? 'var' : 'liquid';
  if (choice !== 'var' && choice !== 'liquid') throw new Error('BENCH_TEMPLATE is var, liquid or alternate');
  return choice;
}

/** The median of each template's figures, for runs that alternate templates. */
export function mediansByTemplate<T extends { template: BenchTemplate }>(rows: T[], figure: (r: T) => number): string {
  return (['var', 'liquid'] as const)
    .filter((t) => rows.some((r) => r.template === t))
    .map((t) => `${t} ${median(rows.filter((r) => r.template === t).map(figure)).toFixed(0)}`)
    .join(', ');
}

/** Creates the campaign benches' campaign to every contact of the project; answers its id. */
export async function createBenchCampaign(
  agent: http.Agent,
  port: number,
  auth: Record<string, string>,
  name: string,
  template: BenchTemplate = 'var',
  extra: Record<string, unknown> = {},
): Promise<string> {
  const body = { name, ...benchTemplates[template], from: 'news@bench.test', fromName: 'News', audienceType: 'ALL', ...extra };
  const res = await request(agent, port, 'POST', '/campaigns', body, auth);
  if (res.status !== 201) throw new Error(`POST /campaigns: ${res.status} ${res.body}`);
  return JSON.parse(res.body).data.id;
}

/** Polls `GET /campaigns/:id` as a client would, until it says SENT. */
export async function campaignSent(agent: http.Agent, port: number, auth: Record<string, string>, id: string): Promise<void> {
  for (;;) {
    const res = await request(agent, port, 'GET', `/campaigns/${id}`, undefined, auth);
    if (res.status !== 200) throw new Error(`GET /campaigns/${id}: ${res.status} ${res.body}`);
    if (JSON.parse(res.body).status === 'SENT') return;
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface ImportJob {
  jobId: string;
  status: string;
  created: number;
}

/**
 * Uploads `csv` to `POST /contacts/import` and polls the job until it ends, as a client would; answers
 * the finished job and when the upload was answered, in seconds from the start.
 */
export async function importContacts(port: number, auth: Record<string, string>, csv: string, filename: string): Promise<{ job: ImportJob; uploaded: number }> {
  const base = `http://127.0.0.1:${port}`;
  const form = new FormData();
  form.append('file', new Blob([csv], { type: 'text/csv' }), filename);
  const t0 = Date.now();
  const res = await fetch(`${base}/contacts/import`, { method: 'POST', body: form, headers: auth });
  const job = (await res.json()) as ImportJob;
  if (res.status !== 202) throw new Error(`upload: ${res.status} ${JSON.stringify(job)}`);
  const uploaded = (Date.now() - t0) / 1000;
  let state = job;
  while (state.status !== 'COMPLETED' && state.status !== 'FAILED') {
    await new Promise((r) => setTimeout(r, 50));
    state = (await (await fetch(`${base}/contacts/import/${job.jobId}`, { headers: auth })).json()) as ImportJob;
  }
  return { job: state, uploaded };
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
export const SEND_BODY =
  `<html><body><h1>Hello {{name ?? there}}</h1>` + `<p>${'Your weekly summary. '.repeat(40)}</p>` + `<a href="https://example.com/x">Open</a></body></html>`;

/** One single-recipient /v1/send request of those benches, to a new contact. */
export const sendRequest = (to: string, i: number) => ({
  to,
  from: 'Bench <hello@bench.test>',
  subject: 'Weekly summary for {{name}}',
  body: SEND_BODY,
  data: { name: `user ${i}` },
});

/** A fixed count of requests to one path, each to a new contact, `connections` at a time: the /v1/send benches' load. */
export interface LoadRun {
  port: number;
  path: string;
  headers: Record<string, string>;
  /** The body of request `i` (from 0) to `address`. */
  body: (address: string, i: number) => unknown;
  /** Addresses are `<prefix>-<i>@example.org`. */
  prefix: string;
  requests: number;
  connections: number;
}

/**
 * The load from this process's own HTTP client through `agent` (which should keep `connections`
 * sockets alive); answers how many answers were not 200 and the CPU seconds this process used meanwhile.
 */
export async function nodeRequests(agent: http.Agent, run: LoadRun): Promise<{ failed: number; cpuSeconds: number }> {
  const cpu0 = process.cpuUsage();
  let next = 0;
  let failed = 0;
  const connection = async () => {
    while (next < run.requests) {
      const i = next++;
      const res = await request(agent, run.port, 'POST', run.path, run.body(`${run.prefix}-${i}@example.org`, i), run.headers);
      if (res.status !== 200) failed++;
    }
  };
  await Promise.all(Array.from({ length: run.connections }, connection));
  const cpu = process.cpuUsage(cpu0);
  return { failed, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

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

/** A process's CPU seconds from /proc: its own (all threads), and its children's that ended and it reaped. */
interface ProcessCpu {
  pid: number;
  ppid: number;
  command: string;
  own: number;
  reaped: number;
}

function processTable(): ProcessCpu[] {
  const table: ProcessCpu[] = [];
  for (const entry of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command may hold spaces and parentheses: the fields start after its last ')'.
      const close = stat.lastIndexOf(') ');
      const fields = stat.slice(close + 2).split(' ');
      const ticks = (i: number) => Number(fields[i]) / 100;
      table.push({
        pid: Number(entry),
        ppid: Number(fields[1]),
        command: stat.slice(stat.indexOf('(') + 1, close),
        own: ticks(11) + ticks(12),
        reaped: ticks(13) + ticks(14),
      });
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return table;
}

/** A process's first words, file names without their directories (`node vite.js build`); its command name once it ended. */
function commandLine(p: ProcessCpu): string {
  try {
    const words = fs.readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return words
      .slice(0, 3)
      .map((w) => path.basename(w))
      .join(' ');
  } catch {
    return p.command;
  }
}

/**
 * CPU seconds of the child processes of a service's `pids`, from /proc: its embedded PostgreSQL (the
 * postmaster and its backends, with those that ended), and every other child with its own children,
 * including those the service already reaped: the Temporal Web UI build's steps (npm ci, vite) when
 * the install did not build it. `others` names the other children running now.
 */
export function childProcessCpu(pids: number[]): { postgres: number; other: number; others: string[] } {
  const table = processTable();
  const children = new Map<number, ProcessCpu[]>();
  for (const p of table) children.set(p.ppid, [...(children.get(p.ppid) ?? []), p]);
  const tree = (p: ProcessCpu): number => p.own + p.reaped + (children.get(p.pid) ?? []).reduce((sum, c) => sum + tree(c), 0);
  const result = { postgres: 0, other: 0, others: [] as string[] };
  for (const root of table.filter((p) => pids.includes(p.pid))) {
    result.other += root.reaped;
    for (const child of children.get(root.pid) ?? []) {
      if (child.command === 'postgres') result.postgres += tree(child);
      else {
        result.other += tree(child);
        result.others.push(commandLine(child));
      }
    }
  }
  return result;
}
