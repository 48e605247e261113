/**
 * The condition engine at 1,000,000 contacts: segment counts (POST /segments/:id/refresh, the
 * condition compiled to one SQL count) for typical conditions, and the first page of GET /contacts.
 *
 *   npm run bench:audience                     # 1,000,000 contacts, 2,000,000 events, 5 timings each
 *   BENCH_CONTACTS=200000 BENCH_REPEAT=9 npm run bench:audience
 */
import http from 'node:http';
import pg from 'pg';
import { createBenchProject, machine, median, request, startServiceProcess, timed } from './service-process';
import { embeddedDatabaseUrl } from '../src/db/embedded-postgres';

const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 1_000_000);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 5);

const where = (...filters: Array<Record<string, unknown>>) => ({ logic: 'AND', groups: [{ filters }] });

const CONDITIONS: Array<[string, unknown]> = [
  ['subscribed = true', where({ field: 'subscribed', operator: 'equals', value: true })],
  ['data.plan = "pro"', where({ field: 'data.plan', operator: 'equals', value: 'pro' })],
  ['data.age > 60', where({ field: 'data.age', operator: 'greaterThan', value: 60 })],
  ['email contains "99"', where({ field: 'email', operator: 'contains', value: '99' })],
  ['createdAt within 7 days', where({ field: 'createdAt', operator: 'within', value: 7, unit: 'days' })],
  ['event.purchase triggered', where({ field: 'event.purchase', operator: 'triggered' })],
  ['event.purchase within 30 days', where({ field: 'event.purchase', operator: 'triggeredWithin', value: 30, unit: 'days' })],
  ['event.signup notTriggered', where({ field: 'event.signup', operator: 'notTriggered' })],
  [
    'plan = pro AND (age > 30 OR purchased)',
    {
      logic: 'AND',
      groups: [
        { filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] },
        {
          filters: [],
          conditions: {
            logic: 'OR',
            groups: [
              { filters: [{ field: 'data.age', operator: 'greaterThan', value: 30 }] },
              { filters: [{ field: 'event.purchase', operator: 'triggered' }] },
            ],
          },
        },
      ],
    },
  ],
];

async function main(): Promise<void> {
  const service = await startServiceProcess({ RATE_LIMIT_PER_MINUTE: '100000000', SEGMENT_REFRESH_SECONDS: '86400' });
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(service.dataDir) });
  await db.connect();
  try {
    const project = await createBenchProject(service.port);
    const agent = new http.Agent({ keepAlive: true });
    const auth = { authorization: `Bearer ${project.secretKey}` };
    console.log(`condition engine at ${CONTACTS} contacts (${CONTACTS * 2} events); median of ${REPEAT} timings`);
    console.log(`machine: ${machine()}`);
    const t0 = Date.now();
    await db.query(
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'user' || i || '@example.org', i % 10 <> 0,
              jsonb_build_object('plan', (ARRAY['free', 'pro', 'team'])[1 + i % 3], 'age', 18 + i % 70, 'country', (ARRAY['no', 'se', 'dk', 'de'])[1 + i % 4]),
              now() - make_interval(mins => i % 100000), now() - make_interval(mins => i % 100000)
       FROM generate_series(1, $2) AS i`,
      [project.id, CONTACTS],
    );
    await db.query(
      `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
       SELECT gen_random_uuid(), c.project_id, c.id, (ARRAY['signup', 'purchase', 'visit', 'visit'])[1 + (x + abs(hashtext(c.email))) % 4], '{}'::jsonb,
              now() - make_interval(hours => (x * 7 + abs(hashtext(c.email))) % 2000)
       FROM contacts c, generate_series(1, 2) AS x WHERE c.project_id = $1`,
      [project.id],
    );
    await db.query('VACUUM ANALYZE contacts');
    await db.query('VACUUM ANALYZE events');
    console.log(`fixtures loaded in ${((Date.now() - t0) / 1000).toFixed(0)} s`);

    const results: Array<[string, number, number]> = [];
    for (const [name, condition] of CONDITIONS) {
      const seg = JSON.parse((await request(agent, service.port, 'POST', '/segments', { name, condition }, auth)).body);
      if (!seg.id) throw new Error(JSON.stringify(seg));
      const times: number[] = [];
      let count = 0;
      for (let i = 0; i < REPEAT; i++) {
        times.push(
          await timed(async () => {
            count = JSON.parse((await request(agent, service.port, 'POST', `/segments/${seg.id}/refresh`, {}, auth)).body).memberCount;
          }),
        );
      }
      results.push([name, median(times), count]);
      console.log(`count ${name.padEnd(40)} ${median(times).toFixed(0).padStart(6)} ms  (${count} members)`);
    }
    const pageTimes: number[] = [];
    for (let i = 0; i < REPEAT * 4; i++) pageTimes.push(await timed(() => request(agent, service.port, 'GET', '/contacts', undefined, auth)));
    const nextTimes: number[] = [];
    const first = JSON.parse((await request(agent, service.port, 'GET', '/contacts', undefined, auth)).body);
    for (let i = 0; i < REPEAT * 4; i++)
      nextTimes.push(await timed(() => request(agent, service.port, 'GET', `/contacts?cursor=${first.cursor}`, undefined, auth)));
    console.log(`GET /contacts first page (with total)      ${median(pageTimes).toFixed(1).padStart(6)} ms`);
    console.log(`GET /contacts next page                    ${median(nextTimes).toFixed(1).padStart(6)} ms`);
    console.log(`slowest count: ${Math.max(...results.map((r) => r[1])).toFixed(0)} ms (goal: every count < 1 s, first page < 20 ms)`);
    agent.destroy();
  } finally {
    await db.end();
    await service.stop();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
