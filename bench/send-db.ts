/**
 * The database part of POST /v1/send alone: the service's own `sendEmails` (sending context, contact
 * upsert, rendering, the queued email and its NOTIFY, in one statement that concurrent sends share
 * through a `SendBatcher`, as the service's are) called directly, 32 at a time, against the embedded
 * PostgreSQL; no HTTP, no delivery. Prints emails/s, PostgreSQL's CPU per email (all its processes,
 * from /proc) and this process's, and the WAL flushes per email. `BENCH_DROP` names what to take away
 * for one extra series, to measure its share (a throwaway database; the service never runs without
 * them): `count-triggers`, `email-search-index`, `notify` (the sends' NOTIFY, which the service leaves
 * out while a drain of its own process runs) or `batcher` (each send its own statement).
 *
 *   npm run bench:send-db                   # 5 rounds of 3,000 sends (the first is a warm-up)
 *   BENCH_DROP=count-triggers npm run bench:send-db
 *   BENCH_RECIPIENTS=8 npm run bench:send-db  # 8 recipients a send (BENCH_EMAILS still counts emails)
 */
import { sql } from '../src/db/orm';
import { Links } from '../src/mail/links';
import { SendBatcher, sendEmails } from '../src/modules/emails/emails.service';
import { startBenchDatabase } from './bench-database';
import { machine, median, postgresCpuSeconds, sendRequest } from './service-process';

const ROUNDS = Number(process.env.BENCH_RUNS ?? 5);
const SENDS = Number(process.env.BENCH_EMAILS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Recipients of each send: what a statement's fixed cost is shared by. */
const RECIPIENTS = Number(process.env.BENCH_RECIPIENTS ?? 1);
const DROPS: Record<string, string[]> = {
  'count-triggers': ['DROP TRIGGER emails_counted_insert ON emails', 'DROP TRIGGER contacts_counted_insert ON contacts'],
  'email-search-index': ['DROP INDEX contacts_email_trgm_idx'],
  // No statement: the sends tell a local queue instead, as while a drain of the service's own process runs.
  notify: [],
  // No statement: each send writes its own.
  batcher: [],
};

async function series(drop: string | undefined) {
  const { orm, projectId, stop } = await startBenchDatabase('send-db', 20);
  try {
    const em = orm.em.fork();
    for (const statement of drop ? DROPS[drop] : []) await sql(em, statement);
    const queue = drop === 'notify' ? { draining: true, queuedHere: () => {} } : undefined;
    const batcher = drop === 'batcher' ? undefined : new SendBatcher(orm);
    const deps = { links: new Links('https://mail.bench.test', 'bench secret'), limits: { attachmentsMaxBytes: 10e6, messageMaxBytes: 20e6 }, queue, batcher };
    const walFlushes = async () => Number((await sql<{ n: string }>(em, `SELECT sum(fsyncs) AS n FROM pg_stat_io WHERE object = 'wal'`))[0].n);
    const rows: Array<{ rate: number; postgres: number; client: number; flushes: number }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const flushes0 = await walFlushes();
      const pg0 = postgresCpuSeconds();
      const cpu0 = process.cpuUsage();
      const t0 = Date.now();
      let next = 0;
      const worker = async () => {
        while (next < SENDS) {
          const i = next;
          next += RECIPIENTS;
          const to = Array.from({ length: Math.min(RECIPIENTS, SENDS - i) }, (_, r) => `user${round}-${i + r}@example.org`);
          await sendEmails(orm.em.fork(), projectId, { ...sendRequest(to[0], i), to }, deps);
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
      const seconds = (Date.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const postgres = postgresCpuSeconds() - pg0;
      // I/O statistics reach the view when a backend flushes them: force ours, wait out the others'.
      await sql(em, `SELECT pg_stat_force_next_flush()`);
      await new Promise((r) => setTimeout(r, 1100));
      const row = {
        rate: SENDS / seconds,
        postgres: (postgres / SENDS) * 1e3,
        client: (cpu.user + cpu.system) / SENDS / 1e3,
        flushes: ((await walFlushes()) - flushes0) / SENDS,
      };
      if (round > 0) rows.push(row);
      console.log(
        `${drop ? `without ${drop}` : 'as shipped'}, round ${round}${round === 0 ? ' (warm-up)' : ''}: ${row.rate.toFixed(0)} emails/s, ` +
          `PostgreSQL ${row.postgres.toFixed(3)} ms CPU/email, this process ${row.client.toFixed(3)} ms CPU/email, ${row.flushes.toFixed(2)} WAL flushes/email`,
      );
    }
    return rows;
  } finally {
    await stop();
  }
}

async function main(): Promise<void> {
  const drop = process.env.BENCH_DROP;
  if (drop && !DROPS[drop]) throw new Error(`BENCH_DROP: one of ${Object.keys(DROPS).join(', ')}`);
  console.log(
    `sendEmails alone, ${SENDS} emails per round in sends of ${RECIPIENTS} recipient${RECIPIENTS === 1 ? '' : 's'}, ` +
      `${CONCURRENCY} concurrent, ${ROUNDS} rounds; machine: ${machine()}`,
  );
  for (const what of drop ? [undefined, drop] : [undefined]) {
    const rows = await series(what);
    const m = (f: (r: (typeof rows)[number]) => number, digits: number) => median(rows.map(f)).toFixed(digits);
    console.log(
      `median, ${what ? `without ${what}` : 'as shipped'}: ${m((r) => r.rate, 0)} emails/s, PostgreSQL ${m((r) => r.postgres, 3)} ms CPU/email, ` +
        `this process ${m((r) => r.client, 3)} ms CPU/email, ${m((r) => r.flushes, 2)} WAL flushes/email`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
