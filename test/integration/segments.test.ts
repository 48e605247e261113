import pg from 'pg';
import { segmentSlug } from '../../src/modules/segments/segments.service';
import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let svc: TestService;
let acct: Account;
let key: { key: string };

beforeAll(async () => {
  svc = await startTestService({ SEGMENT_REFRESH_SECONDS: '1' });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
});
afterAll(() => svc.stop());

const where = (field: string, operator: string, value?: unknown, unit?: string) => ({
  logic: 'AND',
  groups: [{ filters: [{ field, operator, ...(value !== undefined ? { value } : {}), ...(unit ? { unit } : {}) }] }],
});

async function contact(email: string, data: Record<string, unknown> = {}, subscribed = true) {
  return (await svc.api.post('/contacts', { email, data, subscribed }, key)).body as { id: string };
}

const segmentEvents = async (contactId: string) =>
  (await dbQuery(svc.databaseUrl, `SELECT name, data FROM events WHERE contact_id = $1 AND name LIKE 'segment.%' ORDER BY created_at, name`, [contactId])).map(
    (e) => `${e.name}`,
  );

const eventually = <T>(probe: () => Promise<T | undefined>) => until(probe, 20_000);

test('slugs of segment names', () => {
  expect(segmentSlug('VIP Customers')).toBe('vip-customers');
  expect(segmentSlug('  Hello!!  World -- x  ')).toBe('hello-world-x');
  expect(segmentSlug('-Ünï_code 2024-')).toBe('n_code-2024');
});

describe('validation', () => {
  test.each([
    [{ condition: where('data.plan', 'equals', 'pro') }, /name is required/],
    [{ name: 'x' }, /condition is required/],
    [{ name: 'x', condition: 'plan = pro' }, /condition is required/],
    [{ name: 'x', condition: { logic: 'AND', groups: [] } }, /Invalid condition: .*at least one group/],
    [{ name: 'x', condition: where('data.plan', 'looksLike', 'x') }, /unknown operator looksLike/],
    [{ name: 'x', condition: where('createdAt', 'within', 3) }, /needs unit days, hours or minutes/],
    [{ name: 'x', condition: where('segment.00000000-0000-4000-8000-000000000000', 'memberOfSegment') }, /does not exist/],
  ])('%j is 400 { error }', async (body, message) => {
    const res = await svc.api.post('/segments', body, key);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.stringMatching(message) });
  });

  test('too long a name or description is 422; nothing is written', async () => {
    const before = await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM segments');
    expect((await svc.api.post('/segments', { name: 'x'.repeat(101), condition: where('email', 'contains', 'a') }, key)).status).toBe(422);
    expect((await svc.api.post('/segments', { name: 'x', description: 'd'.repeat(501), condition: where('email', 'contains', 'a') }, key)).status).toBe(422);
    expect(await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM segments')).toEqual(before);
  });
});

describe('dynamic segments', () => {
  test('create, count, list (a bare array), members page by page, live as contacts change', async () => {
    for (let i = 0; i < 25; i++) await contact(`pro${i}@seg.test`, { plan: i < 15 ? 'pro' : 'free' });
    const res = await svc.api.post('/segments', { name: 'Pros', description: 'paying', condition: where('data.plan', 'equals', 'pro') }, key);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: 'Pros',
      description: 'paying',
      type: 'DYNAMIC',
      trackMembership: false,
      memberCount: 15,
      projectId: acct.project.id,
    });
    const id = res.body.id;
    expect((await svc.api.get('/segments', key)).body).toEqual(expect.arrayContaining([expect.objectContaining({ id, memberCount: 15 })]));
    const page2 = await svc.api.get(`/segments/${id}/contacts?page=2&pageSize=10`, key);
    expect(page2.body).toMatchObject({ total: 15, page: 2, pageSize: 10 });
    expect(page2.body.data).toHaveLength(5);
    expect(page2.body.data.every((c: any) => c.data.plan === 'pro')).toBe(true);
    expect((await svc.api.get(`/segments/${id}/contacts?pageSize=1000`, key)).body.pageSize).toBe(100);

    await contact('late@seg.test', { plan: 'pro' });
    expect((await svc.api.get(`/segments/${id}/contacts`, key)).body.total).toBe(16);
    const refreshed = await svc.api.post(`/segments/${id}/refresh`, {}, key);
    expect(refreshed.body.memberCount).toBe(16);

    const other = await createAccount(svc.api, 'Other');
    expect((await svc.api.get(`/segments/${id}`, { key: other.project.secretKey })).status).toBe(404);
  });

  test('PATCH changes name, description, condition and tracking; a STATIC segment takes no condition', async () => {
    const s = (await svc.api.post('/segments', { name: 'Free', condition: where('data.plan', 'equals', 'free') }, key)).body;
    const patched = await svc.api.patch(`/segments/${s.id}`, { name: 'Free users', condition: where('data.plan', 'equals', 'nobody') }, key);
    expect(patched.body).toMatchObject({ name: 'Free users', memberCount: 0 });
    const st = (await svc.api.post('/segments', { name: 'Static', type: 'STATIC', condition: where('email', 'contains', 'x') }, key)).body;
    expect(st).toMatchObject({ type: 'STATIC', condition: null });
    expect((await svc.api.patch(`/segments/${st.id}`, { condition: where('email', 'contains', 'x') }, key)).status).toBe(400);
  });

  test('references: a segment cannot refer to itself, directly or through others', async () => {
    const a = (await svc.api.post('/segments', { name: 'A', condition: where('email', 'contains', 'seg') }, key)).body;
    const b = (await svc.api.post('/segments', { name: 'B', condition: where(`segment.${a.id}`, 'memberOfSegment') }, key)).body;
    expect(b.memberCount).toBe(a.memberCount);
    const self = await svc.api.patch(`/segments/${a.id}`, { condition: where(`segment.${a.id}`, 'notMemberOfSegment') }, key);
    expect(self.status).toBe(400);
    const cycle = await svc.api.patch(`/segments/${a.id}`, { condition: where(`segment.${b.id}`, 'memberOfSegment') }, key);
    expect(cycle.status).toBe(400);
    expect(cycle.body.error).toMatch(/refer to itself/);
    // A segment other segments are defined through cannot be deleted.
    const refused = await svc.api.delete(`/segments/${a.id}`, key);
    expect(refused.status).toBe(409);
    expect(refused.body.error.details.segments).toEqual([{ id: b.id, name: 'B' }]);
    expect((await svc.api.delete(`/segments/${b.id}`, key)).body).toEqual({ id: b.id, deleted: true });
    expect((await svc.api.delete(`/segments/${a.id}`, key)).status).toBe(200);
  });
});

describe('static segments', () => {
  test('members are added by email (optionally creating contacts) and removed', async () => {
    await contact('known1@static.test');
    await contact('known2@static.test');
    const s = (await svc.api.post('/segments', { name: 'Hand picked', type: 'STATIC', trackMembership: true }, key)).body;
    const added = await svc.api.post(`/segments/${s.id}/members`, { emails: ['KNOWN1@static.test', 'known2@static.test', 'new@static.test'] }, key);
    expect(added.body).toEqual({ added: 2, alreadyMembers: 0, created: 0, notFound: ['new@static.test'] });
    const created = await svc.api.post(
      `/segments/${s.id}/members`,
      { emails: ['known1@static.test', 'new@static.test'], createMissing: true, subscribed: false },
      key,
    );
    expect(created.body).toEqual({ added: 1, alreadyMembers: 1, created: 1, notFound: [] });
    const fresh = (await svc.api.post('/contacts/lookup', { emails: ['new@static.test'] }, key)).body.found[0];
    expect((await svc.api.get(`/contacts/${fresh.id}`, key)).body.subscribed).toBe(false);
    expect((await svc.api.get(`/segments/${s.id}`, key)).body.memberCount).toBe(3);
    expect((await svc.api.get(`/segments/${s.id}/contacts`, key)).body.total).toBe(3);

    const removed = await svc.api.request('DELETE', `/segments/${s.id}/members`, {
      key: key.key,
      body: { emails: ['known2@static.test', 'stranger@static.test'] },
    });
    expect(removed.body).toEqual({ removed: 1, notMembers: ['stranger@static.test'] });
    expect((await svc.api.get(`/segments/${s.id}`, key)).body.memberCount).toBe(2);
    const known2 = (await svc.api.post('/contacts/lookup', { emails: ['known2@static.test'] }, key)).body.found[0];
    expect(await segmentEvents(known2.id)).toEqual(['segment.hand-picked.entry', 'segment.hand-picked.exit']);

    const tooMany = Array.from({ length: 501 }, (_, i) => `m${i}@static.test`);
    expect((await svc.api.post(`/segments/${s.id}/members`, { emails: tooMany }, key)).status).toBe(422);
    const dyn = (await svc.api.post('/segments', { name: 'Dyn', condition: where('email', 'contains', 'x') }, key)).body;
    expect((await svc.api.post(`/segments/${dyn.id}/members`, { emails: ['a@b.co'] }, key)).status).toBe(400);
  });

  test('a recount racing a membership change never writes back a count that misses it', async () => {
    await contact('race1@static.test');
    const b = await contact('race2@static.test');
    const s = (await svc.api.post('/segments', { name: 'Race', type: 'STATIC' }, key)).body;
    await svc.api.post(`/segments/${s.id}/members`, { emails: ['race1@static.test'] }, key);
    // A writer adds a member and updates the segment's row last, as every membership writer does,
    // and holds its transaction open while a recount starts.
    const writer = new pg.Client({ connectionString: svc.databaseUrl });
    await writer.connect();
    try {
      await writer.query('BEGIN');
      await writer.query(`INSERT INTO segment_memberships (segment_id, contact_id, project_id, entered_at) VALUES ($1, $2, $3, now())`, [
        s.id,
        b.id,
        acct.project.id,
      ]);
      await writer.query(
        `UPDATE segments SET member_count = (SELECT count(*) FROM segment_memberships WHERE segment_id = $1 AND exited_at IS NULL) WHERE id = $1`,
        [s.id],
      );
      const recount = svc.api.post(`/segments/${s.id}/refresh`, {}, key);
      await new Promise((r) => setTimeout(r, 500));
      await writer.query('COMMIT');
      expect((await recount).body.memberCount).toBe(2);
    } finally {
      await writer.end();
    }
  });
});

describe('tracked membership', () => {
  test('entry and exit events follow changes as they happen, exactly once per real change', async () => {
    const c = await contact('vip@track.test', { spend: 10 });
    const s = (await svc.api.post('/segments', { name: 'VIP Customers', trackMembership: true, condition: where('data.spend', 'greaterThan', 100) }, key)).body;
    expect(s.memberCount).toBe(0);

    await svc.api.post('/v1/track', { email: 'vip@track.test', event: 'purchase', data: { spend: 150 } }, { key: acct.project.publicKey });
    await eventually(async () => ((await segmentEvents(c.id)).length === 1 ? true : undefined));
    expect(await segmentEvents(c.id)).toEqual(['segment.vip-customers.entry']);
    const [entry] = await dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE contact_id = $1 AND name = 'segment.vip-customers.entry'`, [c.id]);
    expect(entry.data).toEqual({ segmentId: s.id, segmentName: 'VIP Customers' });

    // More changes that keep it inside change nothing; /compute agrees.
    await svc.api.patch(`/contacts/${c.id}`, { data: { spend: 200 } }, key);
    await svc.api.post(`/segments/${s.id}/compute`, {}, key);
    await svc.live.settled();
    expect(await segmentEvents(c.id)).toEqual(['segment.vip-customers.entry']);

    await svc.api.patch(`/contacts/${c.id}`, { data: { spend: 5 } }, key);
    await eventually(async () => ((await segmentEvents(c.id)).length === 2 ? true : undefined));
    expect(await segmentEvents(c.id)).toEqual(['segment.vip-customers.entry', 'segment.vip-customers.exit']);
    expect((await svc.api.get(`/segments/${s.id}`, key)).body.memberCount).toBe(0);
  });

  test('concurrent changes of one contact still record one entry', async () => {
    const c = await contact('race@track.test', { score: 0 });
    await svc.api.post('/segments', { name: 'Scorers', trackMembership: true, condition: where('data.score', 'greaterThanOrEqual', 1) }, key);
    await Promise.all(Array.from({ length: 8 }, (_, i) => svc.api.patch(`/contacts/${c.id}`, { data: { score: i + 1 } }, key)));
    await svc.live.settled();
    expect((await segmentEvents(c.id)).filter((n) => n === 'segment.scorers.entry')).toHaveLength(1);
  });

  test('time-based conditions are kept true by the background recompute', async () => {
    const c = await contact('recent@track.test');
    const s = (
      await svc.api.post('/segments', { name: 'Recent visitors', trackMembership: true, condition: where('event.visit', 'triggeredWithin', 2, 'minutes') }, key)
    ).body;
    await svc.api.post('/v1/track', { email: 'recent@track.test', event: 'visit' }, { key: acct.project.publicKey });
    await eventually(async () => ((await segmentEvents(c.id)).includes('segment.recent-visitors.entry') ? true : undefined));
    // Age the visit past the window: only the recompute (every second here) can notice.
    await dbQuery(svc.databaseUrl, `UPDATE events SET created_at = now() - interval '3 minutes' WHERE contact_id = $1 AND name = 'visit'`, [c.id]);
    await eventually(async () => ((await segmentEvents(c.id)).includes('segment.recent-visitors.exit') ? true : undefined));
    expect((await svc.api.get(`/segments/${s.id}`, key)).body.memberCount).toBe(0);
    const workflow = await svc.temporal.client.workflow.getHandle(`segment:${s.id}`).describe();
    expect(workflow.status.name).toBe('RUNNING');
    expect(workflow.searchAttributes.SegmentId).toEqual([s.id]);
  });

  test('PATCH trackMembership: turned on, current members enter at once and later changes are recorded; turned off, nothing more', async () => {
    const inside = await contact('in@patch-track.test', { level: 'gold' });
    const outside = await contact('out@patch-track.test', { level: 'tin' });
    const s = (await svc.api.post('/segments', { name: 'Patched Gold', condition: where('data.level', 'equals', 'gold') }, key)).body;
    expect(s).toMatchObject({ trackMembership: false, memberCount: 1 });
    await svc.live.settled();
    expect(await segmentEvents(inside.id)).toEqual([]);

    const on = await svc.api.patch(`/segments/${s.id}`, { trackMembership: true }, key);
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ id: s.id, trackMembership: true, memberCount: 1 });
    expect(await segmentEvents(inside.id)).toEqual(['segment.patched-gold.entry']);
    expect(await segmentEvents(outside.id)).toEqual([]);
    await svc.live.settled();

    await svc.api.patch(`/contacts/${inside.id}`, { data: { level: 'tin' } }, key);
    await eventually(async () => ((await segmentEvents(inside.id)).length === 2 ? true : undefined));
    expect(await segmentEvents(inside.id)).toEqual(['segment.patched-gold.entry', 'segment.patched-gold.exit']);

    const off = await svc.api.patch(`/segments/${s.id}`, { trackMembership: false }, key);
    expect(off.body).toMatchObject({ trackMembership: false });
    expect((await svc.api.get(`/segments/${s.id}`, key)).body.trackMembership).toBe(false);
    await svc.api.patch(`/contacts/${outside.id}`, { data: { level: 'gold' } }, key);
    await svc.live.settled();
    expect(await segmentEvents(outside.id)).toEqual([]);
    expect((await svc.api.post(`/segments/${s.id}/refresh`, {}, key)).body.memberCount).toBe(1);
  });

  test('/refresh only counts; /compute records events', async () => {
    const c = await contact('late-tracked@track.test', { tier: 'gold' });
    const s = (await svc.api.post('/segments', { name: 'Gold', trackMembership: true, condition: where('data.tier', 'equals', 'gold') }, key)).body;
    expect(await segmentEvents(c.id)).toEqual(['segment.gold.entry']);
    // The entry event itself is activity the live evaluator looks at; let it finish first.
    await svc.live.settled();
    // A change made behind the service's back (no live evaluation) is seen by /compute, not /refresh.
    await dbQuery(svc.databaseUrl, `UPDATE contacts SET data = '{"tier":"silver"}' WHERE id = $1`, [c.id]);
    const refreshed = await svc.api.post(`/segments/${s.id}/refresh`, {}, key);
    expect(refreshed.body.memberCount).toBe(0);
    expect(await segmentEvents(c.id)).toEqual(['segment.gold.entry']);
    const computed = await svc.api.post(`/segments/${s.id}/compute`, {}, key);
    expect(computed.body).toMatchObject({ memberCount: 0, computed: { tracked: true, entered: 0, exited: 1 } });
    expect(await segmentEvents(c.id)).toEqual(['segment.gold.entry', 'segment.gold.exit']);
  });

  test('a deleted segment’s background workflow ends', async () => {
    const s = (await svc.api.post('/segments', { name: 'Temporary', condition: where('email', 'contains', 'x') }, key)).body;
    await svc.api.delete(`/segments/${s.id}`, key);
    const handle = svc.temporal.client.workflow.getHandle(`segment:${s.id}`);
    await eventually(async () => ((await handle.describe()).status.name === 'COMPLETED' ? true : undefined));
  });
});
