/**
 * What one statement costs on this machine, apart from what it does: sequential `SELECT 1` round trips
 * to the embedded PostgreSQL over its Unix socket (what the service uses) and over loopback TCP,
 * with the client's CPU per statement (this process) and the server's (its backend, from /proc).
 * Then the same statements through MikroORM's `execute`, as the service's `sql()` sends them, and a
 * transaction of one such statement three ways: BEGIN/COMMIT on the pg client, the service's `transaction()`,
 * and MikroORM's `transactional`.
 *
 *   npm run bench:pg-roundtrip               # 5 rounds of 5,000 statements each way
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded-postgres';
import { createOrm, sql, transaction } from '../src/db/orm';
import { entities } from '../src/modules/entities';
import { createLogger } from '../src/log';
import { cpuSecondsOf, machine, median } from './service-process';

const ROUNDS = Number(process.env.BENCH_RUNS ?? 5);
const STATEMENTS = Number(process.env.BENCH_STATEMENTS ?? 5000);
const TX = 'a transaction of one statement, Unix socket';
const backendCpuUs = (pid: number) => cpuSecondsOf(pid) * 1e6;

/** µs of wall time, client CPU and server CPU per statement, for `STATEMENTS` statements run by `one`. */
async function measure(backendPid: number, one: () => Promise<unknown>) {
  const cpu0 = process.cpuUsage();
  const server0 = backendCpuUs(backendPid);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < STATEMENTS; i++) await one();
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / STATEMENTS;
  const cpu = process.cpuUsage(cpu0);
  return { wall, client: (cpu.user + cpu.system) / STATEMENTS, server: (backendCpuUs(backendPid) - server0) / STATEMENTS };
}

async function main(): Promise<void> {
  const log = createLogger('warn');
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'postbox-pg-bench-'));
  const db = await startEmbeddedPostgres({ dataDir, log });
  const url = new URL(db.url);
  const socketUrl = db.url;
  url.search = '';
  const tcpUrl = url.toString();
  console.log(`sequential SELECT 1, ${STATEMENTS} per round, ${ROUNDS} rounds; machine: ${machine()}`);
  try {
    const rows: Record<string, Array<{ wall: number; client: number; server: number }>> = {};
    const add = (what: string, r: { wall: number; client: number; server: number }) => (rows[what] ??= []).push(r);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [what, connectionString] of [
        ['pg, Unix socket', socketUrl],
        ['pg, loopback TCP', tcpUrl],
      ]) {
        const client = new pg.Client({ connectionString });
        await client.connect();
        const pid = (await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
        add(what, await measure(pid, () => client.query('SELECT 1')));
        add(`${what}, with a parameter (extended protocol)`, await measure(pid, () => client.query('SELECT $1::int', [1])));
        if (what === 'pg, Unix socket') {
          add(
            `${TX}: pg, BEGIN + statement + COMMIT`,
            await measure(pid, async () => {
              await client.query('BEGIN');
              await client.query('SELECT $1::int', [1]);
              await client.query('COMMIT');
            }),
          );
        }
        await client.end();
      }
      const orm = await createOrm(socketUrl, { entities, poolMax: 1, log });
      const em = orm.em.fork();
      const pid = (await sql<{ pid: number }>(em, 'SELECT pg_backend_pid() AS pid'))[0].pid;
      add("MikroORM execute (the service's sql()), Unix socket", await measure(pid, () => sql(em, 'SELECT ?::int', [1])));
      // What a transaction costs apart from its statements: the service's transaction() against MikroORM's own (knex's) machinery.
      add(`${TX}: transaction() + sql()`, await measure(pid, () => transaction(em, (tx) => sql(tx, 'SELECT ?::int', [1]))));
      add(`${TX}: MikroORM transactional + sql()`, await measure(pid, () => em.fork().transactional((tx) => sql(tx, 'SELECT ?::int', [1]))));
      await orm.close();
    }
    for (const [what, rs] of Object.entries(rows)) {
      const m = (f: (r: (typeof rs)[number]) => number) => median(rs.map(f)).toFixed(0).padStart(5);
      const per = what.startsWith(TX) ? 'transaction' : 'statement';
      console.log(`${what.padEnd(60)} wall ${m((r) => r.wall)} µs, client CPU ${m((r) => r.client)} µs, server CPU ${m((r) => r.server)} µs per ${per}`);
    }
  } finally {
    await db.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
