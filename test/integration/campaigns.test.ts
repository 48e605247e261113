import pg from 'pg';
import { dbQuery } from '../setup/db';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, CAMPAIGN_BATCH_SIZE: '20', EMAIL_RETRY_BASE_SECONDS: '1' });
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});
beforeEach(() => {
  smtp.received.length = 0;
  smtp.delayMs = 0;
  smtp.reply = () => 'accept';
});

async function setup(name: string) {
  const acct = await createAccount(svc.api, name);
  const key = { key: acct.project.secretKey };
  const domain = `${name.toLowerCase().replace(/\W/g, '')}.test`;
  await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  return { acct, key, from: `news@${domain}` };
}

const base = (from: string) => ({
  name: 'Spring',
  subject: 'Hi {{name ?? there}}',
  body: '<html><body><p>News for {{name ?? you}} on the {{plan}} plan</p></body></html>',
  from,
  audienceType: 'ALL',
});

const statusOf = async (key: { key: string }, id: string) => (await svc.api.get(`/campaigns/${id}`, key)).body.status;
const whenStatus = (key: { key: string }, id: string, status: string) => until(async () => ((await statusOf(key, id)) === status ? true : undefined));

describe('create, list, change', () => {
  test('create answers { success, data } in DRAFT; audience rules are 400, schema 422, sender 403', async () => {
    const { acct, key, from } = await setup('Create');
    const res = await svc.api.post('/campaigns', { ...base(from), description: 'd' }, key);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      data: expect.objectContaining({
        status: 'DRAFT',
        type: 'MARKETING',
        audienceType: 'ALL',
        totalRecipients: 0,
        projectId: acct.project.id,
        scheduledFor: null,
      }),
    });
    expect(res.body.data.segmentId).toBeUndefined();

    expect((await svc.api.post('/campaigns', { ...base(from), audienceType: 'SEGMENT' }, key)).status).toBe(400);
    expect((await svc.api.post('/campaigns', { ...base(from), audienceType: 'FILTERED' }, key)).status).toBe(400);
    const badCondition = await svc.api.post('/campaigns', { ...base(from), audienceType: 'FILTERED', audienceCondition: { logic: 'XOR', groups: [] } }, key);
    expect(badCondition.status).toBe(400);
    expect(badCondition.body.error.code).toBe('INVALID_CONDITION');
    const missing = await svc.api.post('/campaigns', { subject: 's', body: 'b', from, audienceType: 'ALL' }, key);
    expect(missing.status).toBe(422);
    expect(missing.body.error.errors[0].field).toBe('name');
    const sender = await svc.api.post('/campaigns', { ...base('x@unverified.test') }, key);
    expect(sender.status).toBe(403);
    expect(sender.body.error.code).toBe('INTERNAL_SERVER_ERROR');
    const other = await setup('Other');
    const theirSegment = (
      await svc.api.post(
        '/segments',
        { name: 's', condition: { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'contains', value: 'x' }] }] } },
        other.key,
      )
    ).body;
    expect((await svc.api.post('/campaigns', { ...base(from), audienceType: 'SEGMENT', segmentId: theirSegment.id }, key)).status).toBe(400);
  });

  test('list: offset pages, status filter (unknown is 400), search, sort', async () => {
    const { key, from } = await setup('Lister');
    for (let i = 0; i < 23; i++)
      await svc.api.post('/campaigns', { ...base(from), name: `C${String(i).padStart(2, '0')}`, subject: i === 5 ? 'Needle' : 's' }, key);
    const first = await svc.api.get('/campaigns', key);
    expect(first.body).toMatchObject({ page: 1, pageSize: 20, total: 23, totalPages: 2 });
    expect(first.body.data[0].name).toBe('C22');
    expect((await svc.api.get('/campaigns?page=2', key)).body.data.map((c: any) => c.name)).toEqual(['C02', 'C01', 'C00']);
    expect((await svc.api.get('/campaigns?status=DRAFT', key)).body.total).toBe(23);
    expect((await svc.api.get('/campaigns?status=SENT', key)).body.total).toBe(0);
    const bad = await svc.api.get('/campaigns?status=DONE', key);
    expect(bad.status).toBe(400);
    expect(bad.body.success).toBe(false);
    expect((await svc.api.get('/campaigns?search=needle', key)).body.data.map((c: any) => c.name)).toEqual(['C05']);
    expect((await svc.api.get('/campaigns?sort=name&dir=asc&pageSize=2', key)).body.data.map((c: any) => c.name)).toEqual(['C00', 'C01']);
  });

  test('PUT replaces a draft; duplicate makes a new draft; only drafts are deleted', async () => {
    const { key, from } = await setup('Changer');
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    const put = await svc.api.put(`/campaigns/${c.id}`, { ...base(from), name: 'Renamed', type: 'TRANSACTIONAL' }, key);
    expect(put.body).toMatchObject({ id: c.id, name: 'Renamed', type: 'TRANSACTIONAL', description: null });
    expect((await svc.api.put(`/campaigns/${c.id}`, { name: 'x' }, key)).status).toBe(422);
    const dup = await svc.api.post(`/campaigns/${c.id}/duplicate`, {}, key);
    expect(dup.status).toBe(201);
    expect(dup.body.data).toMatchObject({ name: 'Renamed (copy)', status: 'DRAFT' });
    expect((await svc.api.delete(`/campaigns/${dup.body.data.id}`, key)).body).toEqual({ id: dup.body.data.id, deleted: true });
    expect((await svc.api.get(`/campaigns/${dup.body.data.id}`, key)).status).toBe(404);
  });
});

describe('sending', () => {
  test('only subscribed contacts receive it, each rendered with their data; stats and counters are true', async () => {
    const { key, from } = await setup('Sender');
    await svc.api.post('/contacts', { email: 'a@r.test', data: { name: 'Ann', plan: 'pro' } }, key);
    await svc.api.post('/contacts', { email: 'b@r.test', data: { name: 'Bob', plan: 'free' } }, key);
    await svc.api.post('/contacts', { email: 'c@r.test', data: { plan: 'free' } }, key);
    await svc.api.post('/contacts', { email: 'out@r.test', subscribed: false }, key);
    const snoozed = (await svc.api.post('/contacts', { email: 'nap@r.test' }, key)).body;
    await svc.api.patch(`/contacts/${snoozed.id}`, { snooze: '1_month' }, key);
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;

    const sent = await svc.api.post(`/campaigns/${c.id}/send`, {}, key);
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ success: true, data: { status: 'SENDING' }, message: expect.any(String) });
    await whenStatus(key, c.id, 'SENT');
    const got = await smtp.waitFor(3);
    expect(got.map((m) => m.envelope.to[0]).sort()).toEqual(['a@r.test', 'b@r.test', 'c@r.test']);
    const ann = got.find((m) => m.envelope.to[0] === 'a@r.test')!;
    expect(ann.parsed.subject).toBe('Hi Ann');
    expect(ann.parsed.html).toContain('News for Ann on the pro plan');
    expect(ann.parsed.headerLines.find((h) => h.key === 'list-unsubscribe')).toBeDefined();
    expect(ann.parsed.html).toContain('Unsubscribe</a>');

    const campaign = (await svc.api.get(`/campaigns/${c.id}`, key)).body;
    expect(campaign).toMatchObject({ status: 'SENT', totalRecipients: 3, sentCount: 3, sentAt: expect.any(String) });
    const stats = (await svc.api.get(`/campaigns/${c.id}/stats`, key)).body;
    expect(stats).toMatchObject({ totalRecipients: 3, total: 3, sent: 3, queued: 0, failed: 0, opened: 0 });

    // An open of one recipient's copy moves the counters.
    const pixel = /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(String(ann.parsed.html))![1];
    await svc.api.get(pixel.slice(svc.api.baseUrl.length));
    expect((await svc.api.get(`/campaigns/${c.id}`, key)).body.openedCount).toBe(1);
    expect((await svc.api.get(`/campaigns/${c.id}/stats`, key)).body).toMatchObject({ opened: 1, openRate: 33.33 });
    const events = await dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE name = 'email.sent' AND data->>'campaignId' = $1`, [c.id]);
    expect(events).toHaveLength(3);

    expect((await svc.api.post(`/campaigns/${c.id}/send`, {}, key)).status).toBe(400);
    expect((await svc.api.put(`/campaigns/${c.id}`, base(from), key)).status).toBe(400);
    expect((await svc.api.delete(`/campaigns/${c.id}`, key)).status).toBe(400);
    expect((await svc.api.post(`/campaigns/${c.id}/cancel`, {}, key)).status).toBe(400);
  });

  test('a recipient refused with 4xx is sent on a later attempt, one refused with 5xx fails; each email counts its attempts', async () => {
    const { key, from } = await setup('Refusals');
    for (const email of ['ok@r.test', 'later@r.test', 'never@r.test']) await svc.api.post('/contacts', { email }, key);
    let refusals = 0;
    smtp.reply = (to) => {
      if (to[0] === 'later@r.test' && refusals++ < 1) return { code: 451, message: 'Busy' };
      // A refusal of the message, not of the address (that one is a hard bounce: bounces.test.ts).
      return to[0] === 'never@r.test' ? { code: 554, message: '5.7.1 Message refused by policy' } : 'accept';
    };
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    expect((await svc.api.post(`/campaigns/${c.id}/send`, {}, key)).status).toBe(200);
    await whenStatus(key, c.id, 'SENT');
    const rows = await dbQuery(svc.databaseUrl, `SELECT to_email, status, attempts FROM emails WHERE campaign_id = $1 ORDER BY to_email`, [c.id]);
    expect(rows).toEqual([
      { to_email: 'later@r.test', status: 'SENT', attempts: 2 },
      { to_email: 'never@r.test', status: 'FAILED', attempts: 1 },
      { to_email: 'ok@r.test', status: 'SENT', attempts: 1 },
    ]);
    expect(smtp.received.map((m) => m.envelope.to[0]).sort()).toEqual(['later@r.test', 'ok@r.test']);
    expect((await svc.api.get(`/campaigns/${c.id}`, key)).body).toMatchObject({ sentCount: 2 });
    expect((await svc.api.get(`/campaigns/${c.id}/stats`, key)).body).toMatchObject({ sent: 2, failed: 1, queued: 0 });
  });

  test('a campaign goes out in chunks of CAMPAIGN_BATCH_SIZE (20 here, 45 recipients), delivered by activities in flight together', async () => {
    const { key, from } = await setup('Batches');
    for (let i = 0; i < 45; i++) await svc.api.post('/contacts', { email: `r${i}@batches.test` }, key);
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    expect((await svc.api.post(`/campaigns/${c.id}/send`, {}, key)).status).toBe(200);
    await whenStatus(key, c.id, 'SENT');
    const received = await smtp.waitFor(45);
    expect(received.filter((m) => m.envelope.to[0].endsWith('@batches.test'))).toHaveLength(45);
    const history = await svc.temporal.client.workflow.getHandle(`campaign-send:${c.id}`).fetchHistory();
    const events = history.events!;
    const chunks = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverCampaignChunk');
    expect(chunks).toHaveLength(3);
    // All three were scheduled before the first of them completed: one plan, then every chunk at once.
    const chunkIds = new Set(chunks.map((e) => String(e.eventId)));
    const firstCompleted = events.findIndex((e) => chunkIds.has(String(e.activityTaskCompletedEventAttributes?.scheduledEventId)));
    expect(events.indexOf(chunks[2])).toBeLessThan(firstCompleted);
  });

  test('SEGMENT and FILTERED audiences', async () => {
    const { key, from } = await setup('Audiences');
    for (const [email, plan] of [
      ['p1@a.test', 'pro'],
      ['p2@a.test', 'pro'],
      ['f1@a.test', 'free'],
    ]) {
      await svc.api.post('/contacts', { email, data: { plan } }, key);
    }
    const pro = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] };
    const segment = (await svc.api.post('/segments', { name: 'Pro', condition: pro }, key)).body;
    const bySegment = (await svc.api.post('/campaigns', { ...base(from), audienceType: 'SEGMENT', segmentId: segment.id }, key)).body.data;
    expect(bySegment.segmentId).toBe(segment.id);
    await svc.api.post(`/campaigns/${bySegment.id}/send`, {}, key);
    await whenStatus(key, bySegment.id, 'SENT');
    expect((await smtp.waitFor(2)).map((m) => m.envelope.to[0]).sort()).toEqual(['p1@a.test', 'p2@a.test']);
    // A segment an active campaign uses cannot be deleted; after it is sent, it can.
    const draft = (await svc.api.post('/campaigns', { ...base(from), audienceType: 'SEGMENT', segmentId: segment.id }, key)).body.data;
    expect((await svc.api.delete(`/segments/${segment.id}`, key)).status).toBe(409);
    await svc.api.delete(`/campaigns/${draft.id}`, key);
    expect((await svc.api.delete(`/segments/${segment.id}`, key)).body).toEqual({ id: segment.id, deleted: true });
    expect((await svc.api.get(`/campaigns/${bySegment.id}`, key)).body).toMatchObject({ status: 'SENT', segmentId: null, sentCount: 2 });

    smtp.received.length = 0;
    const free = { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'free' }] }] };
    const filtered = (await svc.api.post('/campaigns', { ...base(from), audienceType: 'FILTERED', audienceCondition: free }, key)).body.data;
    expect(filtered.audienceCondition).toEqual(free);
    await svc.api.post(`/campaigns/${filtered.id}/send`, {}, key);
    await whenStatus(key, filtered.id, 'SENT');
    expect((await smtp.waitFor(1)).map((m) => m.envelope.to[0])).toEqual(['f1@a.test']);

    const nobody = (
      await svc.api.post(
        '/campaigns',
        {
          ...base(from),
          audienceType: 'FILTERED',
          audienceCondition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'none' }] }] },
        },
        key,
      )
    ).body.data;
    const empty = await svc.api.post(`/campaigns/${nobody.id}/send`, {}, key);
    expect(empty.status).toBe(400);
    expect(empty.body.error.code).toBe('NO_RECIPIENTS');
  });

  test('scheduling: a bad date is 400, a campaign sleeps until its time, can be moved, and the audience is fixed when sending starts', async () => {
    const { key, from } = await setup('Scheduler');
    await svc.api.post('/contacts', { email: 'early@s.test' }, key);
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    expect((await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: 'next tuesday-ish' }, key)).status).toBe(400);
    expect((await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: '2020-01-01T00:00:00Z' }, key)).status).toBe(400);
    const later = new Date(Date.now() + 3600_000).toISOString();
    const scheduled = await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: later }, key);
    expect(scheduled.body).toMatchObject({ data: { status: 'SCHEDULED', scheduledFor: later }, message: expect.stringContaining('scheduled') });
    expect((await svc.temporal.client.workflow.getHandle(`campaign-send:${c.id}`).describe()).status.name).toBe('RUNNING');
    expect((await svc.api.delete(`/campaigns/${c.id}`, key)).status).toBe(409);

    // Moved to another time; a contact added before sending starts is in the audience. (That the
    // workflow then sleeps until the new time is test/workflows/campaign-send.test.ts's, in skipped time.)
    const other = new Date(Date.now() + 2 * 3600_000).toISOString();
    const moved = await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: other }, key);
    expect(moved.body.data).toMatchObject({ status: 'SCHEDULED', scheduledFor: other });
    await svc.api.post('/contacts', { email: 'joined@s.test' }, key);
    // Then sent now: a scheduled campaign's time moved to the present.
    const now = await svc.api.post(`/campaigns/${c.id}/send`, {}, key);
    expect(now.body.data).toMatchObject({ status: 'SENDING', scheduledFor: null });
    await whenStatus(key, c.id, 'SENT');
    expect((await smtp.waitFor(2)).map((m) => m.envelope.to[0]).sort()).toEqual(['early@s.test', 'joined@s.test']);
    await svc.api.post('/contacts', { email: 'toolate@s.test' }, key);
    expect((await svc.api.get(`/campaigns/${c.id}`, key)).body.totalRecipients).toBe(2);
    // Both moves went through the workflow's reschedule update: accepted and answered in its history.
    const events = (await svc.temporal.client.workflow.getHandle(`campaign-send:${c.id}`).fetchHistory()).events ?? [];
    const accepted = events.filter((e) => e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'reschedule');
    expect(accepted).toHaveLength(2);
    expect(events.some((e) => e.workflowExecutionUpdateCompletedEventAttributes?.outcome?.success)).toBe(true);
  });

  test('a move that reaches the workflow after sending began is refused (400 CAMPAIGN_NOT_SENDABLE) and changes nothing', async () => {
    const { key, from } = await setup('Late mover');
    await svc.api.post('/contacts', { email: 'late@m.test' }, key);
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    const at = new Date(Date.now() + 1500).toISOString();
    expect((await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: at }, key)).body.data.status).toBe('SCHEDULED');
    // Hold the campaign row, as a concurrent move request would, while its time comes and sending begins.
    const holder = new pg.Client({ connectionString: svc.databaseUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM campaigns WHERE id = $1 FOR UPDATE', [c.id]);
      const handle = svc.temporal.client.workflow.getHandle(`campaign-send:${c.id}`);
      await until(async () => (await handle.describe()).raw.pendingActivities?.some((a) => a.activityType?.name === 'startCampaignSend') || undefined);
      const refused = await svc.temporal.rescheduleCampaignWorkflow(c.id, new Date(Date.now() + 3600_000));
      expect(refused).toEqual({ refused: expect.stringContaining('already being sent') });
    } finally {
      await holder.query('COMMIT');
      await holder.end();
    }
    await whenStatus(key, c.id, 'SENT');
    expect((await svc.api.get(`/campaigns/${c.id}`, key)).body.scheduledFor).toBe(at);
  });

  test('send: scheduledFor null sends at once; another project’s campaign is 404; an id that is not a UUID is 422', async () => {
    const { key, from } = await setup('Nuller');
    await svc.api.post('/contacts', { email: 'now@n.test' }, key);
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    const stranger = await createAccount(svc.api, 'Stranger');
    const foreign = await svc.api.post(`/campaigns/${c.id}/send`, {}, { key: stranger.project.secretKey });
    expect(foreign.status).toBe(404);
    expect(foreign.body.error.code).toBe('NOT_FOUND');
    const bad = await svc.api.post('/campaigns/not-a-uuid/send', {}, key);
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors).toEqual([expect.objectContaining({ field: 'id' })]);
    expect(await statusOf(key, c.id)).toBe('DRAFT');

    const res = await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: null }, key);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, data: { id: c.id, status: 'SENDING', scheduledFor: null }, message: expect.any(String) });
    await whenStatus(key, c.id, 'SENT');
    expect((await smtp.waitFor(1)).map((m) => m.envelope.to[0])).toEqual(['now@n.test']);
  });

  test('cancel: a scheduled campaign sends nothing; a sending one stops what has not left', async () => {
    const { key, from } = await setup('Canceller');
    // More than the chunks in flight at once can hold (4 of 20, and the process's 64 permits).
    for (let i = 0; i < 200; i++) await svc.api.post('/contacts', { email: `r${i}@c.test` }, key);
    const scheduled = (await svc.api.post('/campaigns', base(from), key)).body.data;
    await svc.api.post(`/campaigns/${scheduled.id}/send`, { scheduledFor: new Date(Date.now() + 1500).toISOString() }, key);
    const cancelled = await svc.api.post(`/campaigns/${scheduled.id}/cancel`, {}, key);
    expect(cancelled.body.data.status).toBe('CANCELLED');
    // Its workflow ended cancelled without ever fixing the audience: nothing is left that could send it.
    const scheduledRun = svc.temporal.client.workflow.getHandle(`campaign-send:${scheduled.id}`);
    await until(async () => ((await scheduledRun.describe()).status.name === 'CANCELLED' ? true : undefined));
    const scheduledHistory = (await scheduledRun.fetchHistory()).events ?? [];
    expect(scheduledHistory.some((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'startCampaignSend')).toBe(false);
    expect(await dbQuery(svc.databaseUrl, `SELECT 1 FROM emails WHERE campaign_id = $1`, [scheduled.id])).toHaveLength(0);
    expect(smtp.received).toHaveLength(0);
    expect(await statusOf(key, scheduled.id)).toBe('CANCELLED');

    // Every worker hears of a cancel on this channel at its commit (CampaignStops).
    const listener = new pg.Client({ connectionString: svc.databaseUrl });
    await listener.connect();
    const stopped: string[] = [];
    listener.on('notification', (m) => stopped.push(m.payload ?? ''));
    await listener.query('LISTEN postbox_campaign_stopped');
    smtp.delayMs = 100;
    const sending = (await svc.api.post('/campaigns', base(from), key)).body.data;
    await svc.api.post(`/campaigns/${sending.id}/send`, {}, key);
    await until(async () => (smtp.received.length >= 5 ? true : undefined));
    // While it is sending it cannot be deleted, only cancelled.
    const busy = await svc.api.delete(`/campaigns/${sending.id}`, key);
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe('CAMPAIGN_ACTIVE');
    expect((await svc.api.post(`/campaigns/${sending.id}/cancel`, {}, key)).body.data.status).toBe('CANCELLED');
    await until(async () => (stopped.includes(sending.id) ? true : undefined), 5000, 'the cancel notified');
    await listener.end();
    await until(async () => {
      const [r] = await dbQuery(svc.databaseUrl, `SELECT count(*) FILTER (WHERE status = 'QUEUED')::int AS q FROM emails WHERE campaign_id = $1`, [sending.id]);
      return r.q === 0 ? true : undefined;
    });
    await new Promise((r) => setTimeout(r, 1500));
    const received = smtp.received.length;
    await new Promise((r) => setTimeout(r, 1500));
    expect(smtp.received.length).toBe(received);
    expect(received).toBeLessThan(200);
    const stats = (await svc.api.get(`/campaigns/${sending.id}/stats`, key)).body;
    expect(stats.status).toBe('CANCELLED');
    expect(stats.sent + stats.cancelled).toBe(200);
    expect(stats.sent).toBe(received);
  });

  test('a test send goes to one address, marked [Test], and counts nowhere', async () => {
    const { key, from } = await setup('Tester');
    const c = (await svc.api.post('/campaigns', base(from), key)).body.data;
    const res = await svc.api.post(`/campaigns/${c.id}/test`, { email: 'me@t.test' }, key);
    expect(res.body).toEqual({
      success: true,
      data: { email: expect.any(String), to: 'me@t.test', emails: [{ email: res.body.data.email, to: 'me@t.test', status: 'QUEUED' }] },
    });
    const [msg] = await smtp.waitFor(1);
    expect(msg.parsed.subject).toBe('[Test] Hi there');
    expect((await svc.api.get(`/campaigns/${c.id}/stats`, key)).body).toMatchObject({ total: 0, sent: 0 });
    expect(await statusOf(key, c.id)).toBe('DRAFT');
    expect((await svc.api.post(`/campaigns/${c.id}/test`, { email: 'nope' }, key)).status).toBe(422);
  });
});

test('a scheduled campaign still fires after the service restarts', async () => {
  const env = { DNS_SERVERS: dns.address, SMTP_URL: smtp.url, TEMPORAL_DEV_SERVER_PERSISTENCE: 'postgres' };
  let durable = await startTestService(env);
  const acct = await createAccount(durable.api, 'Durable');
  const key = { key: acct.project.secretKey };
  await verifiedDomain(durable.api, dns, acct.project.secretKey, 'durable.test');
  await durable.api.post('/contacts', { email: 'later@d.test' }, key);
  const c = (await durable.api.post('/campaigns', base('news@durable.test'), key)).body.data;
  const at = Date.now() + 4000;
  await durable.api.post(`/campaigns/${c.id}/send`, { scheduledFor: new Date(at).toISOString() }, key);
  const databaseUrl = durable.databaseUrl;
  await durable.stop();
  // A real wait, on purpose: this checks a durable timer that fell due while the service and Temporal were down
  // fires after the restart, which skipped time (test/workflows) cannot show.
  await new Promise((r) => setTimeout(r, Math.max(0, at + 500 - Date.now())));
  expect(smtp.received).toHaveLength(0);
  durable = await startTestService({ ...env, DATABASE_URL: databaseUrl });
  try {
    const [msg] = await smtp.waitFor(1, 60_000);
    expect(msg.envelope.to).toEqual(['later@d.test']);
    await until(async () => ((await durable.api.get(`/campaigns/${c.id}`, key)).body.status === 'SENT' ? true : undefined));
  } finally {
    await durable.stop();
  }
});
