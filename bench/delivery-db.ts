/**
 * The database part of delivering transactional mail alone: the dispatcher's own claim (batches of
 * BENCH_BATCH, 32) and its recording of accepted mail as SENT with `email.sent` (groups of BENCH_GROUP,
 * 8), one statement at a time as a drain runs them, against the embedded PostgreSQL; no SMTP. Mail is
 * queued first by `sendEmails` (the /v1/send message of bench:send). Prints PostgreSQL's CPU per email
 * (all its processes, from /proc) and this process's, for each part.
 *
 *   npm run bench:delivery-db               # 4 rounds of 4,000 emails (the first is a warm-up)
 *   BENCH_GROUP=32 npm run bench:delivery-db
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../src/db/ids';
import type { QueueSignal } from '../src/db/work-queue';
import type { MessageSender } from '../src/delivery/delivery-threads';
import { Links } from '../src/mail/links';
import { DeliveryEngine, type QueuedEmail } from '../src/delivery';
import { deliveryPorts } from '../src/engine-ports';
import { sendEmails } from '../src/modules/emails/emails.service';
import { startBenchDatabase } from './bench-database';
import { machine, median, postgresCpuSeconds, sendRequest } from './service-process';

const ROUNDS = Number(process.env.BENCH_RUNS ?? 4);
const EMAILS = Number(process.env.BENCH_EMAILS ?? 4000);
const BATCH = Number(process.env.BENCH_BATCH ?? 32);
const GROUP = Number(process.env.BENCH_GROUP ?? 8);

/** The two steps of a drain this bench times, which the dispatcher keeps to itself. */
interface DrainSteps {
  claim(owner: string): Promise<QueuedEmail[]>;
  recordSent(
    em: EntityManager,
    sent: Array<{ email: QueuedEmail; outcome: { kind: 'sent'; providerMessageId: string } }>,
    subjects: Map<string, string>,
  ): Promise<unknown>;
}

async function main(): Promise<void> {
  const { orm, projectId, log, stop } = await startBenchDatabase('delivery-db', 6);
  try {
    const deps = { links: new Links('https://mail.bench.test', 'bench secret'), limits: { attachmentsMaxBytes: 10e6, messageMaxBytes: 20e6 } };
    const dispatcher = new DeliveryEngine({ orm, ports: deliveryPorts, sender: {} as MessageSender, queue: {} as QueueSignal, log, batchSize: BATCH });
    const steps = dispatcher as unknown as DrainSteps;
    console.log(`claim in batches of ${BATCH}, record SENT in groups of ${GROUP}, ${EMAILS} emails per round, ${ROUNDS} rounds; machine: ${machine()}`);
    const rows: Array<{ claimPg: number; claimCaller: number; recordPg: number; recordCaller: number }> = [];
    for (let round = 0; round < ROUNDS; round++) {
      let next = 0;
      const queue = async () => {
        while (next < EMAILS) {
          const i = next++;
          await sendEmails(orm.em.fork(), projectId, sendRequest(`user${round}-${i}@example.org`, i), deps);
        }
      };
      await Promise.all(Array.from({ length: 16 }, queue));
      const measure = async (part: () => Promise<void>) => {
        const pg0 = postgresCpuSeconds();
        const cpu0 = process.cpuUsage();
        await part();
        const cpu = process.cpuUsage(cpu0);
        return { pg: postgresCpuSeconds() - pg0, caller: (cpu.user + cpu.system) / 1e6 };
      };
      const claimed: QueuedEmail[] = [];
      const claim = await measure(async () => {
        for (let batch = await steps.claim('bench'); batch.length; batch = await steps.claim('bench')) claimed.push(...batch);
      });
      const record = await measure(async () => {
        for (let i = 0; i < claimed.length; i += GROUP) {
          const sent = claimed.slice(i, i + GROUP).map((email) => ({ email, outcome: { kind: 'sent' as const, providerMessageId: newId() } }));
          await steps.recordSent(orm.em.fork(), sent, new Map());
        }
      });
      const per = (seconds: number) => (seconds / claimed.length) * 1e6;
      const row = { claimPg: per(claim.pg), claimCaller: per(claim.caller), recordPg: per(record.pg), recordCaller: per(record.caller) };
      if (round > 0) rows.push(row);
      console.log(
        `round ${round}${round === 0 ? ' (warm-up)' : ''}: ${claimed.length} emails; claim: PostgreSQL ${row.claimPg.toFixed(0)} µs, ` +
          `this process ${row.claimCaller.toFixed(0)} µs per email; ` +
          `record SENT: PostgreSQL ${row.recordPg.toFixed(0)} µs, this process ${row.recordCaller.toFixed(0)} µs per email`,
      );
    }
    const m = (f: (r: (typeof rows)[number]) => number) => median(rows.map(f)).toFixed(0);
    console.log(
      `median: claim PostgreSQL ${m((r) => r.claimPg)} µs, this process ${m((r) => r.claimCaller)} µs; ` +
        `record SENT PostgreSQL ${m((r) => r.recordPg)} µs, this process ${m((r) => r.recordCaller)} µs (per email)`,
    );
  } finally {
    await stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
