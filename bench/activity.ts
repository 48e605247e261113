/**
 * Activity and analytics at 1,000,000 events: every /activity and /analytics endpoint (and the older
 * /events summaries) timed over HTTP against one project holding 1M events spread over 90 days,
 * 100,000 contacts, 200 sent campaigns, 50 scheduled ones and 10,000 waiting automation executions.
 *
 *   npm run bench:activity                       # 1,000,000 events, median of 7 timings each
 *   BENCH_EVENTS=200000 BENCH_REPEAT=9 npm run bench:activity
 */
import http from 'node:http';
import pg from 'pg';
import { createBenchProject, machine, median, request, startServiceProcess, timed } from './service-process';
import { embeddedDatabaseUrl } from '../src/db/embedded-postgres';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const CONTACTS = Math.max(1000, Math.floor(EVENTS / 10));
const REPEAT = Number(process.env.BENCH_REPEAT ?? 7);

/** Name mix of a sending project: mostly mail lifecycle, a long tail of custom events. */
const NAMES: Array<[string, number]> = [
  ['email.sent', 30],
  ['email.delivery', 25],
  ['email.open', 14],
  ['email.click', 4],
  ['email.bounce', 1],
  ['contact.subscribed', 1],
  ['contact.unsubscribed', 1],
  ...Array.from({ length: 24 }, (_, i) => [`custom_${i}`, 1] as [string, number]),
];

async function main(): Promise<void> {
  const service = await startServiceProcess({ RATE_LIMIT_PER_MINUTE: '100000000', SEGMENT_REFRESH_SECONDS: '86400' });
  const db = new pg.Client({ connectionString: embeddedDatabaseUrl(service.dataDir) });
  await db.connect();
  try {
    const project = await createBenchProject(service.port);
    const agent = new http.Agent({ keepAlive: true });
    const auth = { authorization: `Bearer ${project.secretKey}` };
    console.log(`activity and analytics at ${EVENTS} events, ${CONTACTS} contacts; median of ${REPEAT} timings`);
    console.log(`machine: ${machine()}`);
    const t0 = Date.now();
    await db.query(
      `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'user' || i || '@example.org', true, '{}'::jsonb, now() - interval '91 days', now()
       FROM generate_series(1, $2) AS i`,
      [project.id, CONTACTS],
    );
    // A weighted pick of names, and times spread over 90 days (a few in the last minutes, as in life).
    const weights = NAMES.flatMap(([name, w]) => Array(w).fill(name));
    await db.query(
      `WITH c AS (SELECT array_agg(id) AS ids FROM contacts WHERE project_id = $1)
       INSERT INTO events (id, project_id, contact_id, name, data, created_at)
       SELECT gen_random_uuid(), $1, c.ids[1 + i % array_length(c.ids, 1)], n.name,
              CASE WHEN n.name = 'email.bounce' THEN jsonb_build_object('bounceType', CASE WHEN i % 3 = 0 THEN 'Transient' ELSE 'Permanent' END)
                   WHEN n.name LIKE 'email.%' THEN jsonb_build_object('emailId', gen_random_uuid()) ELSE '{}'::jsonb END,
              now() - make_interval(secs => (abs(hashint4(i)) % (90 * 86400))::float8)
       FROM c, generate_series(1, $2) AS i,
            LATERAL (SELECT ($3::text[])[1 + abs(hashint4(i + 7)) % array_length($3::text[], 1)] AS name) n`,
      [project.id, EVENTS, weights],
    );
    await db.query(
      `INSERT INTO campaigns (id, project_id, name, subject, body, from_email, status, audience_type, total_recipients, sent_count,
         delivered_count, opened_count, clicked_count, bounced_count, complained_count, sent_at, scheduled_for, created_at, updated_at)
       SELECT gen_random_uuid(), $1, 'Campaign ' || i, 'Subject ' || i, '<p>x</p>', 'news@example.org',
              CASE WHEN i <= 200 THEN 'SENT' ELSE 'SCHEDULED' END, 'ALL', 5000, 5000, 4900, 1000 + (i * 37) % 2000, (i * 13) % 500, i % 50, i % 5,
              CASE WHEN i <= 200 THEN now() - make_interval(days => i % 90) END,
              CASE WHEN i > 200 THEN now() + make_interval(hours => i) END, now(), now()
       FROM generate_series(1, 250) AS i`,
      [project.id],
    );
    const workflow = await db.query(
      `INSERT INTO workflows (id, project_id, name, trigger_config) VALUES (gen_random_uuid(), $1, 'Nurture', '{"eventName":"custom_1"}') RETURNING id`,
      [project.id],
    );
    await db.query(
      `INSERT INTO workflow_executions (id, workflow_id, project_id, contact_id, status, definition, resume_at)
       SELECT gen_random_uuid(), $2, $1, c.id, 'WAITING', '{"steps":[],"transitions":[]}', now() + make_interval(mins => c.n::int)
       FROM (SELECT id, row_number() OVER () AS n FROM contacts WHERE project_id = $1 LIMIT 10000) c`,
      [project.id, workflow.rows[0].id],
    );
    for (const t of ['contacts', 'events', 'campaigns', 'workflow_executions']) await db.query(`VACUUM ANALYZE ${t}`);
    console.log(`fixtures loaded in ${((Date.now() - t0) / 1000).toFixed(0)} s`);

    // The standing activity-counts workflow folds the deltas the inserts wrote; wait for it (it runs every minute).
    const foldStart = Date.now();
    for (;;) {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM activity_count_deltas WHERE project_id = $1`, [project.id]);
      if (rows[0].n === 0) break;
      if (Date.now() - foldStart > 180_000) throw new Error(`deltas not folded after 3 minutes (${rows[0].n} left)`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const counted = await db.query(`SELECT count(*)::int AS rows, sum(n)::bigint AS events FROM activity_counts WHERE project_id = $1 AND source = 'event'`, [
      project.id,
    ]);
    console.log(
      `deltas folded within ${((Date.now() - foldStart) / 1000).toFixed(0)} s: ${counted.rows[0].rows} hourly rows for ${counted.rows[0].events} events`,
    );

    const get = async (path: string) => {
      const res = await request(agent, service.port, 'GET', path, undefined, auth);
      if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.body}`);
      return JSON.parse(res.body);
    };
    const day = 86_400_000;
    const iso = (msAgo: number) => new Date(Date.now() - msAgo).toISOString();
    let deepCursor = '';
    {
      let page = await get('/activity?limit=100');
      for (let i = 0; i < 49; i++) page = await get(`/activity?limit=100&cursor=${page.cursor}`);
      deepCursor = page.cursor;
    }
    const cases: Array<[string, string]> = [
      ['activity, first page (with total)', '/activity'],
      ['activity, page 51 of 100', `/activity?limit=100&cursor=${deepCursor}`],
      ['activity, types=email.bounce', '/activity?types=email.bounce'],
      ['activity, types=email.open,email.click', '/activity?types=email.open,email.click'],
      ['activity, since 7 days', `/activity?since=${iso(7 * day)}`],
      ['activity/stats, 30 days by day', '/activity/stats'],
      ['activity/stats, 90 days by day', `/activity/stats?from=${iso(90 * day)}`],
      ['activity/stats, 7 days by hour', `/activity/stats?interval=hour&from=${iso(7 * day)}`],
      ['activity/recent-count, 5 minutes', '/activity/recent-count'],
      ['activity/recent-count, 24 hours', '/activity/recent-count?minutes=1440'],
      ['activity/recent-count, since 90 days', `/activity/recent-count?since=${iso(90 * day)}`],
      ['activity/types', '/activity/types'],
      ['activity/upcoming', '/activity/upcoming'],
      ['analytics/timeseries, 30 days', '/analytics/timeseries'],
      ['analytics/timeseries, 90 days', `/analytics/timeseries?from=${iso(90 * day)}`],
      ['analytics/top-campaigns', '/analytics/top-campaigns'],
      ['analytics/top-campaigns, openRate', '/analytics/top-campaigns?metric=openRate'],
      ['analytics/campaign-stats', '/analytics/campaign-stats'],
      ['analytics/top-events', '/analytics/top-events'],
      ['events, first page (with total)', '/events'],
      ['events/names', '/events/names'],
      ['events/stats', '/events/stats'],
    ];
    let slowest = 0;
    for (const [label, path] of cases) {
      await get(path); // warm
      const times: number[] = [];
      for (let i = 0; i < REPEAT; i++) times.push(await timed(() => get(path)));
      const m = median(times);
      if (!label.startsWith('events/')) slowest = Math.max(slowest, m);
      console.log(`${label.padEnd(42)} ${m.toFixed(1).padStart(8)} ms`);
    }
    console.log(`slowest /activity or /analytics answer: ${slowest.toFixed(1)} ms (goal: each < 200 ms)`);
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
