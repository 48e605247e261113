import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import os from 'node:os';
import { loadConfig } from '../config';
import { embeddedDatabaseUrl } from '../db/embedded-postgres';
import { isUuid } from '../db/ids';
import { createOrm } from '../db/orm';
import { entities } from '../modules/entities';
import { type ZoneRecords, ZoneDnsServer } from '../dns/zone-server';
import { createLogger } from '../log';
import { reinstateProject } from '../modules/security';

const USAGE = `Usage:
  npm run cli -- create-project --email E --password P --name N [--url http://localhost:8080]
  npm run cli -- dns-server --zone zone.json [--port 5353]
  npm run cli -- reinstate-project --project ID [--by NAME]

create-project signs up (or logs in, if the account exists) through the running service's HTTP API,
creates a project and prints its keys.

dns-server is a small local DNS server for trying sender domains without a real one: it serves the
records listed in the zone file (the response of POST /domains saved as is, or an array of them),
re-read whenever the file changes. Point the service at it with DNS_SERVERS=127.0.0.1:<port>.

reinstate-project lifts a project's suspension for its bounce or complaint rate (an operator's
decision): its API keys work again and rates are judged afresh from now. It connects to DATABASE_URL,
or to the embedded PostgreSQL of the service running in DATA_DIR.`;

async function call(url: string, method: string, path: string, body?: unknown, cookie?: string) {
  const res = await fetch(url + path, {
    method,
    headers: { 'content-type': 'application/json', ...(cookie ? { cookie } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the API's own JSON answers, read field by field
  const json = (await res.json().catch(() => ({}))) as Record<string, any>;
  return { status: res.status, json, cookie: res.headers.get('set-cookie')?.split(';')[0] };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- as above
const describe = (r: { status: number; json: Record<string, any> }) => `${r.status} ${r.json?.error?.message ?? r.json?.error ?? JSON.stringify(r.json)}`;

async function createProject(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { email: { type: 'string' }, password: { type: 'string' }, name: { type: 'string' }, url: { type: 'string' } },
  });
  if (!values.email || !values.password || !values.name) throw new Error(`--email, --password and --name are required\n\n${USAGE}`);
  const url = (values.url ?? process.env.POSTBOX_URL ?? `http://localhost:${process.env.PORT ?? 8080}`).replace(/\/+$/, '');
  const credentials = { email: values.email, password: values.password };
  let session = await call(url, 'POST', '/auth/signup', credentials);
  if (session.status === 409) session = await call(url, 'POST', '/auth/login', credentials);
  if (session.status >= 300 || !session.cookie) throw new Error(`could not sign in at ${url}: ${describe(session)}`);
  const project = await call(url, 'POST', '/users/@me/projects', { name: values.name }, session.cookie);
  if (project.status !== 201) throw new Error(`could not create the project: ${describe(project)}`);
  const p = project.json;
  process.stdout.write([`Project:    ${p.name} (${p.id})`, `Public key: ${p.publicKey}`, `Secret key: ${p.secretKey}`].join('\n') + '\n');
}

interface ZoneFileRecord {
  type: keyof ZoneRecords;
  name: string;
  value: string;
  /** An MX record's priority, beside its exchange in `value` (POST /domains' record shape). */
  priority?: number;
}

/** What the zone server serves for a zone file's record: an MX is its exchange with its priority. */
const zoneValue = (r: ZoneFileRecord): unknown => (r.type === 'MX' ? { exchange: r.value, priority: r.priority ?? 10 } : r.value);

function readZone(file: string): ZoneFileRecord[] {
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
  const docs = Array.isArray(parsed) ? parsed : [parsed];
  return docs.flatMap((d) => (d as { records?: ZoneFileRecord[] }).records ?? [d as ZoneFileRecord]).filter((r) => r?.name && r?.type);
}

async function dnsServer(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { zone: { type: 'string' }, port: { type: 'string' } } });
  if (!values.zone) throw new Error(`--zone is required\n\n${USAGE}`);
  const zoneFile = path.resolve(values.zone);
  const server = new ZoneDnsServer();
  server.port = Number(values.port ?? 5353);
  const load = () => {
    server.zone.clear();
    const records = readZone(zoneFile);
    for (const r of records) server.add(r.name, r.type, zoneValue(r));
    process.stdout.write(`serving ${records.length} records from ${zoneFile}\n`);
  };
  load();
  fs.watchFile(zoneFile, { interval: 500 }, () => {
    try {
      load();
    } catch (err) {
      process.stderr.write(`zone file not reloaded: ${(err as Error).message}\n`);
    }
  });
  await server.start();
  process.stdout.write(`DNS server listening on ${server.address} (UDP and TCP); set DNS_SERVERS=${server.address}\n`);
  await new Promise(() => {});
}

async function reinstate(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { project: { type: 'string' }, by: { type: 'string' } } });
  if (!values.project || !isUuid(values.project)) throw new Error(`--project <uuid> is required\n\n${USAGE}`);
  const config = loadConfig();
  const log = createLogger('warn');
  const orm = await createOrm(config.DATABASE_URL ?? embeddedDatabaseUrl(config.dataDir), { entities, poolMax: 1, log });
  try {
    const { lifted } = await reinstateProject(orm.em.fork(), values.project, values.by ?? `cli:${os.userInfo().username}`);
    process.stdout.write(
      lifted ? `Project ${values.project} enabled; ${lifted} suspension(s) lifted\n` : `Project ${values.project}: 0 suspension(s) lifted, nothing changed\n`,
    );
  } finally {
    await orm.close();
  }
}

async function main(): Promise<void> {
  const [command, ...rest] = process.argv.slice(2);
  if (command === 'create-project') return createProject(rest);
  if (command === 'dns-server') return dnsServer(rest);
  if (command === 'reinstate-project') return reinstate(rest);
  throw new Error(command ? `unknown command "${command}"\n\n${USAGE}` : USAGE);
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).message}\n`);
  process.exit(1);
});
