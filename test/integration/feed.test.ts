import { ZoneDnsServer } from '../../src/dns/zone-server';
import { foldFeedCounts } from '../../src/modules/feed/feed-counts';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
let acct: Account;
let key: { key: string };

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url });
  acct = await createAccount(svc.api, 'Activity');
  key = { key: acct.project.secretKey };
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});

const track = (email: string, event: string, data?: Record<string, unknown>) =>
  svc.api.post('/v1/track', { email, event, data }, { key: acct.project.publicKey });

/** Events recorded at chosen times, as if tracked then (the counts see them through the same trigger). */
async function backdated(projectId: string, contactId: string, rows: Array<[string, Date]>) {
  await dbQuery(
    svc.databaseUrl,
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT gen_random_uuid(), $1, $2, n, '{}'::jsonb, t FROM unnest($3::text[], $4::timestamptz[]) AS u(n, t)`,
    [projectId, contactId, rows.map((r) => r[0]), rows.map((r) => r[1].toISOString())],
  );
}

describe('activity counts', () => {
  let other: Account;
  let contactId: string;
  const now = new Date();
  const dayStart = (d: Date) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));

  beforeAll(async () => {
    other = await createAccount(svc.api, 'Counted');
    const t = await svc.api.post('/v1/track', { email: 'counted@x.test', event: 'seed' }, { key: other.project.publicKey });
    contactId = t.body.data.contact;
    await backdated(other.project.id, contactId, [
      ['purchase', new Date(now.getTime() - 3 * DAY)],
      ['purchase', new Date(now.getTime() - 3 * DAY)],
      ['purchase', new Date(now.getTime() - 2 * DAY)],
      ['refund', new Date(now.getTime() - 2 * DAY)],
      ['purchase', new Date(now.getTime() - 40 * 60_000)],
      ['purchase', new Date(now.getTime() - 100 * 60_000)],
      ['old', new Date(now.getTime() - 60 * DAY)],
    ]);
  });
  const okey = () => ({ key: other.project.secretKey });

  test('stats: counts per type per day, zero days included, the same before and after the fold', async () => {
    const from = new Date(now.getTime() - 4 * DAY).toISOString();
    const read = async () => (await svc.api.get(`/activity/stats?from=${from}&interval=day`, okey())).body;
    const before = await read();
    await foldFeedCounts(svc.orm.em.fork());
    const after = await read();
    expect(after).toEqual(before);
    expect(before.interval).toBe('day');
    expect(before.from).toBe(dayStart(new Date(now.getTime() - 4 * DAY)).toISOString());
    expect(before.series).toHaveLength(5);
    expect(before.totals).toEqual({ purchase: 5, refund: 1, seed: 1 });
    expect(before.total).toBe(7);
    const day = (offset: number) => before.series.find((s: any) => s.date === dayStart(new Date(now.getTime() - offset * DAY)).toISOString());
    expect(day(4)).toEqual({ date: expect.any(String), total: 0, counts: {} });
    expect(day(3).counts).toEqual({ purchase: 2 });
    expect(day(2).counts).toEqual({ purchase: 1, refund: 1 });

    const filtered = (await svc.api.get(`/activity/stats?from=${from}&types=refund,seed`, okey())).body;
    expect(filtered.totals).toEqual({ refund: 1, seed: 1 });
  });

  test('recent-count is exact inside partial hours; types lists everything by frequency', async () => {
    const since = new Date(Date.now() - 90 * 60_000).toISOString();
    expect((await svc.api.get(`/activity/recent-count?since=${encodeURIComponent(since)}`, okey())).body).toMatchObject({ count: 2, since });
    expect((await svc.api.get('/activity/recent-count?minutes=60', okey())).body.count).toBe(2); // the purchase 40 min ago and the seed
    // Whole days, whole hours and partial hours at both ends, all in one window.
    const days = new Date(Date.now() - 5 * DAY - 17 * 60_000).toISOString();
    expect((await svc.api.get(`/activity/recent-count?since=${days}`, okey())).body.count).toBe(7);
    const types = (await svc.api.get('/activity/types', okey())).body.data;
    expect(types).toEqual([
      { type: 'purchase', category: 'custom', count: 5 },
      { type: 'old', category: 'custom', count: 1 },
      { type: 'refund', category: 'custom', count: 1 },
      { type: 'seed', category: 'custom', count: 1 },
    ]);
  });

  test('deleting events, or their contact, takes them out of every count', async () => {
    expect((await svc.api.delete('/events/refund', okey())).body.deleted).toBe(1);
    let types = (await svc.api.get('/activity/types', okey())).body.data.map((t: any) => t.type);
    expect(types).not.toContain('refund');
    await foldFeedCounts(svc.orm.em.fork());
    expect((await svc.api.delete(`/contacts/${contactId}`, okey())).status).toBe(200);
    types = (await svc.api.get('/activity/types', okey())).body.data;
    expect(types).toEqual([]);
    expect((await svc.api.get('/activity/recent-count?minutes=1440', okey())).body.count).toBe(0);
  });

  test('top-events: the client’s own names, most frequent first, reserved names left out', async () => {
    for (const e of ['a', 'b', 'b', 'c', 'c', 'c']) await track('top@x.test', e);
    await svc.api.post('/v1/track', { email: 'top@x.test', event: 'b', subscribed: false }, { key: acct.project.publicKey });
    const res = await svc.api.get('/analytics/top-events?limit=2', key);
    // Ties by name.
    expect(res.body.data).toEqual([
      { name: 'b', count: 3 },
      { name: 'c', count: 3 },
    ]);
    expect(res.body.distinct).toBe(3);
    const types = (await svc.api.get('/activity/types', key)).body.data;
    expect(types).toContainEqual({ type: 'contact.unsubscribed', category: 'contact', count: 1 });
  });

  test('bad parameters are 400 INVALID_PARAMETER naming the parameter', async () => {
    for (const q of [
      '/activity?since=yesterday',
      '/activity/stats?interval=fortnight',
      '/activity/stats?from=2026-01-02&to=2026-01-01',
      '/activity/stats?from=2000-01-01&interval=hour',
      '/analytics/top-campaigns?metric=revenue',
      '/activity?cursor=nope',
    ]) {
      const res = await svc.api.get(q, key);
      expect([q, res.status, res.body.error.code]).toEqual([q, 400, 'INVALID_PARAMETER']);
    }
    const unknownCursor = await svc.api.get('/activity?cursor=00000000-0000-4000-8000-000000000000', key);
    expect(unknownCursor.status).toBe(400);
    expect((await svc.api.get('/activity', { key: acct.project.publicKey })).status).toBe(401);
  });
});

describe('the feed', () => {
  let feedAcct: Account;
  const fkey = () => ({ key: feedAcct.project.secretKey });

  beforeAll(async () => {
    feedAcct = await createAccount(svc.api, 'Feed');
    for (let i = 0; i < 7; i++) {
      const res = await svc.api.post(
        '/v1/track',
        { email: `f${i % 3}@feed.test`, event: i % 2 ? 'odd' : 'even', data: { i } },
        { key: feedAcct.project.publicKey },
      );
      expect(res.status).toBe(200);
    }
  });

  test('newest first, every item with its contact; cursor pages walk it all once; total on the first page only', async () => {
    const first = (await svc.api.get('/activity?limit=3', fkey())).body;
    expect(first.total).toBe(7);
    expect(first.hasMore).toBe(true);
    expect(first.data[0]).toEqual({
      id: expect.any(String),
      type: 'even',
      category: 'custom',
      contact: { id: expect.any(String), email: 'f0@feed.test' },
      emailId: null,
      campaignId: null,
      data: { i: 6 },
      createdAt: expect.stringMatching(/Z$/),
    });
    const seen = [...first.data];
    let page = first;
    while (page.hasMore) {
      page = (await svc.api.get(`/activity?limit=3&cursor=${page.cursor}`, fkey())).body;
      expect(page.total).toBe(0);
      seen.push(...page.data);
    }
    expect(seen.map((e: any) => e.data.i)).toEqual([6, 5, 4, 3, 2, 1, 0]);
  });

  test('types filter merges each type in time order, and pages the same way', async () => {
    const odd = (await svc.api.get('/activity?types=odd', fkey())).body;
    expect(odd.data.map((e: any) => e.data.i)).toEqual([5, 3, 1]);
    expect(odd.total).toBe(3);
    const both = (await svc.api.get('/activity?types=odd&types=even&limit=4', fkey())).body;
    expect(both.data.map((e: any) => e.data.i)).toEqual([6, 5, 4, 3]);
    const rest = (await svc.api.get(`/activity?types=odd,even&limit=4&cursor=${both.cursor}`, fkey())).body;
    expect(rest.data.map((e: any) => e.data.i)).toEqual([2, 1, 0]);
    expect(rest.hasMore).toBe(false);
    expect((await svc.api.get('/activity?types=nothing', fkey())).body).toEqual({ data: [], cursor: '', hasMore: false, total: 0 });
  });

  test('since and until bound the feed', async () => {
    const all = (await svc.api.get('/activity', fkey())).body.data;
    const mid = all[3].createdAt;
    const after = (await svc.api.get(`/activity?since=${mid}`, fkey())).body;
    expect(after.data.every((e: any) => e.createdAt >= mid)).toBe(true);
    const before = (await svc.api.get(`/activity?until=${mid}`, fkey())).body;
    expect(before.data.every((e: any) => e.createdAt < mid)).toBe(true);
    expect(after.total + before.total).toBe(7);
  });
});

describe('mail analytics and what is coming up', () => {
  let mail: Account;
  let mkey: { key: string };
  let from: string;

  beforeAll(async () => {
    mail = await createAccount(svc.api, 'Mail');
    mkey = { key: mail.project.secretKey };
    await verifiedDomain(svc.api, dns, mail.project.secretKey, 'analytics.test');
    from = 'news@analytics.test';
  });

  test('a sent campaign shows in the time series, top campaigns and the campaign breakdown', async () => {
    for (const e of ['r1@m.test', 'r2@m.test', 'r3@m.test']) await svc.api.post('/contacts', { email: e }, mkey);
    const campaign = (await svc.api.post('/campaigns', { name: 'Launch', subject: 'Hi', body: '<p>Hello</p>', from, audienceType: 'ALL' }, mkey)).body.data;
    const draft = (await svc.api.post('/campaigns', { name: 'Draft', subject: 'Hi', body: '<p>Hello</p>', from, audienceType: 'ALL' }, mkey)).body.data;
    expect((await svc.api.post(`/campaigns/${campaign.id}/send`, {}, mkey)).status).toBe(200);
    await until(async () => ((await svc.api.get(`/campaigns/${campaign.id}`, mkey)).body.status === 'SENT' ? true : undefined));
    // An open through the tracking pixel, as a mail client would.
    const received = await smtp.waitFor(3);
    const html = String(received.find((m) => m.envelope.to[0] === 'r1@m.test')!.parsed.html);
    const pixel = /<img src="([^"]+\/t\/o\/([0-9a-f-]+)\/[^"]+)"/.exec(html)!;
    expect((await fetch(pixel[1])).status).toBe(200);
    const email = { id: pixel[2] };

    const series = (await svc.api.get('/analytics/timeseries?interval=hour&from=' + new Date(Date.now() - 2 * HOUR).toISOString(), mkey)).body;
    expect(series.totals).toEqual({ sent: 3, delivered: 0, opened: 1, clicked: 0, bounced: 0, complained: 0 });
    expect(series.data.length).toBeGreaterThanOrEqual(2);
    expect(series.data.reduce((n: number, b: any) => n + b.sent, 0)).toBe(3);

    const top = (await svc.api.get('/analytics/top-campaigns?metric=openRate', mkey)).body;
    expect(top).toEqual({ metric: 'openRate', data: [expect.objectContaining({ id: campaign.id, sent: 3, opened: 1, openRate: 0.3333 })] });

    const stats = (await svc.api.get('/analytics/campaign-stats', mkey)).body;
    expect(stats.total).toBe(1);
    expect(stats.data.map((c: any) => c.id)).toEqual([campaign.id]);
    expect(stats.data[0]).toMatchObject({ recipients: 3, sent: 3, opened: 1, clicked: 0, status: 'SENT' });
    expect(stats.summary).toMatchObject({ sent: 3, opened: 1, openRate: 0.3333 });
    const one = (await svc.api.get(`/analytics/campaign-stats?campaignId=${draft.id}`, mkey)).body;
    expect(one.data[0]).toMatchObject({ id: draft.id, status: 'DRAFT', sent: 0 });
    expect((await svc.api.get(`/analytics/campaign-stats?campaignId=${acct.project.id}`, mkey)).status).toBe(404);

    const feed = (await svc.api.get('/activity?types=email.open', mkey)).body.data;
    expect(feed).toEqual([expect.objectContaining({ type: 'email.open', category: 'email', emailId: email.id, campaignId: campaign.id })]);
  });

  test('upcoming: scheduled campaigns by send time and waiting executions by when they resume', async () => {
    const later = new Date(Date.now() + 3 * DAY).toISOString();
    const sooner = new Date(Date.now() + DAY).toISOString();
    const ids: string[] = [];
    for (const at of [later, sooner]) {
      const c = (await svc.api.post('/campaigns', { name: `At ${at}`, subject: 'Hi', body: '<p>x</p>', from, audienceType: 'ALL' }, mkey)).body.data;
      expect((await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: at }, mkey)).status).toBe(200);
      ids.push(c.id);
    }
    const w = (await svc.api.post('/workflows', { name: 'Nurture', triggerConfig: { eventName: 'joined' } }, mkey)).body;
    const delay = (await svc.api.post(`/workflows/${w.id}/steps`, { name: 'wait', type: 'DELAY', config: { amount: 2, unit: 'days' } }, mkey)).body;
    await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: w.steps[0].id, toStepId: delay.id }, mkey);
    expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, mkey)).status).toBe(200);
    await svc.api.post('/v1/track', { email: 'nurtured@m.test', event: 'joined' }, { key: mail.project.publicKey });

    const up = await until(async () => {
      const body = (await svc.api.get('/activity/upcoming', mkey)).body;
      return body.executions.length && body.executions[0].resumeAt ? body : undefined;
    });
    expect(up.campaigns.map((c: any) => [c.id, c.scheduledFor])).toEqual([
      [ids[1], sooner],
      [ids[0], later],
    ]);
    expect(up.executions).toEqual([
      expect.objectContaining({
        workflowId: w.id,
        workflowName: 'Nurture',
        contact: { id: expect.any(String), email: 'nurtured@m.test' },
        waitingFor: 'delay',
      }),
    ]);
    const resumeIn = Date.parse(up.executions[0].resumeAt) - Date.now();
    expect(resumeIn).toBeGreaterThan(2 * DAY - 60_000);
    expect(resumeIn).toBeLessThanOrEqual(2 * DAY);
    expect(up.totals).toEqual({ campaigns: 2, executions: 1 });
    expect((await svc.api.get('/activity/upcoming?limit=1', mkey)).body.campaigns).toHaveLength(1);
  });
});
