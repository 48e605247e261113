import { foldFeedCounts } from '../../src/modules/feed/feed-counts';
import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc.stop());

async function freshProject(): Promise<{ acct: Account; key: { key: string } }> {
  const acct = await createAccount(svc.api);
  return { acct, key: { key: acct.project.secretKey } };
}

const countContacts = async (projectId: string) =>
  (await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM contacts WHERE project_id = $1', [projectId]))[0].n;

describe('POST /contacts (upsert)', () => {
  test('creates with 201 and _meta.isNew, then updates the same email with 200 and _meta.isUpdate', async () => {
    const { key } = await freshProject();
    const created = await svc.api.post('/contacts', { email: ' Jane@Example.com ', data: { plan: 'free' } }, key);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      email: 'jane@example.com',
      subscribed: true,
      snoozedUntil: null,
      data: { plan: 'free' },
      _meta: { isNew: true, isUpdate: false },
    });
    expect(created.body.id).toMatch(/^[0-9a-f-]{36}$/);
    const updated = await svc.api.post('/contacts', { email: 'JANE@example.com', data: { plan: 'pro' } }, key);
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ id: created.body.id, data: { plan: 'pro' }, _meta: { isNew: false, isUpdate: true } });
  });

  test('subscribed defaults to true for new contacts and is kept when omitted on update', async () => {
    const { key } = await freshProject();
    const a = await svc.api.post('/contacts', { email: 'a@example.com', subscribed: false }, key);
    expect(a.body.subscribed).toBe(false);
    const again = await svc.api.post('/contacts', { email: 'a@example.com', data: { x: 1 } }, key);
    expect(again.body.subscribed).toBe(false);
  });

  test('a missing email is 400 in the simple { error } form, a bad one 422; nothing is written', async () => {
    const { acct, key } = await freshProject();
    const missing = await svc.api.post('/contacts', { subscribed: true }, key);
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ error: expect.stringMatching(/email/) });
    const bad = await svc.api.post('/contacts', { email: 'nope' }, key);
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0]).toMatchObject({ field: 'email', code: 'invalid_string' });
    const badData = await svc.api.post('/contacts', { email: 'ok@example.com', data: { locale: 12 } }, key);
    expect(badData.status).toBe(422);
    expect(await countContacts(acct.project.id)).toBe(0);
  });

  test('data map rules: null deletes, empty string is ignored, reserved keys dropped, non-persistent values not stored', async () => {
    const { key } = await freshProject();
    await svc.api.post('/contacts', { email: 'd@example.com', data: { a: 1, b: 'keep', c: true, nested: { k: [1, 2] } } }, key);
    const res = await svc.api.post(
      '/contacts',
      {
        email: 'd@example.com',
        data: {
          a: null,
          b: '',
          id: 'x',
          email: 'evil@example.com',
          unsubscribeUrl: 'http://x',
          svc_id: 1,
          temp: { value: 'only now', persistent: false },
          kept: { value: 'stored', persistent: true },
          locale: 'de',
        },
      },
      key,
    );
    expect(res.body.data).toEqual({ b: 'keep', c: true, nested: { k: [1, 2] }, kept: 'stored', locale: 'de' });
    expect(res.body.email).toBe('d@example.com');
  });
});

describe('GET /contacts', () => {
  let key: { key: string };
  beforeAll(async () => {
    ({ key } = await freshProject());
    for (let i = 0; i < 45; i++) {
      const email = `user${String(i).padStart(2, '0')}@${i % 3 === 0 ? 'alpha' : 'beta'}.com`;
      await svc.api.post('/contacts', { email, subscribed: i % 5 !== 0 }, key);
    }
  });

  test('pages by cursor until hasMore is false; total only on the first page; newest first by default', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    const pages: any[] = [];
    do {
      const res = await svc.api.get(`/contacts?limit=20${cursor ? `&cursor=${cursor}` : ''}`, key);
      expect(res.status).toBe(200);
      pages.push(res.body);
      seen.push(...res.body.data.map((c: any) => c.email));
      cursor = res.body.hasMore ? res.body.cursor : undefined;
    } while (cursor);
    expect(pages.map((p) => p.data.length)).toEqual([20, 20, 5]);
    expect(pages.map((p) => p.total)).toEqual([45, 0, 0]);
    expect(pages.map((p) => p.hasMore)).toEqual([true, true, false]);
    expect(new Set(seen).size).toBe(45);
    expect(seen[0]).toBe('user44@beta.com');
    expect(seen[44]).toBe('user00@alpha.com');
    expect(typeof pages[0].cursor).toBe('string');
  });

  test('limit defaults to 20 and is clamped to 100', async () => {
    expect((await svc.api.get('/contacts', key)).body.data).toHaveLength(20);
    expect((await svc.api.get('/contacts?limit=abc', key)).body.data).toHaveLength(20);
    const p = await freshProject();
    for (let i = 0; i < 105; i++) await svc.api.post('/contacts', { email: `c${i}@x.com` }, p.key);
    const res = await svc.api.get('/contacts?limit=500', p.key);
    expect(res.body.data).toHaveLength(100);
    expect(res.body.hasMore).toBe(true);
  });

  test('search is a case-insensitive substring of the email; subscribed and status filter', async () => {
    const alpha = await svc.api.get('/contacts?search=ALPHA&limit=100', key);
    expect(alpha.body.total).toBe(15);
    expect(alpha.body.data.every((c: any) => c.email.includes('alpha'))).toBe(true);
    const literal = await svc.api.get(`/contacts?search=${encodeURIComponent('%')}`, key);
    expect(literal.body.total).toBe(0);
    const unsub = await svc.api.get('/contacts?subscribed=false&limit=100', key);
    expect(unsub.body.total).toBe(9);
    expect(unsub.body.data.every((c: any) => c.subscribed === false)).toBe(true);
    const both = await svc.api.get('/contacts?limit=1', key);
    expect(both.body.total).toBe(45);
    expect((await svc.api.get('/contacts?status=unsubscribed', key)).body.total).toBe(9);
    expect((await svc.api.get('/contacts?status=subscribed', key)).body.total).toBe(36);
    const badBool = await svc.api.get('/contacts?subscribed=maybe', key);
    expect(badBool.status).toBe(400);
    expect(badBool.body).toEqual({ error: expect.any(String) });
  });

  test('sort by email in either direction; unrecognised sort and dir fall back to createdAt desc', async () => {
    const asc = await svc.api.get('/contacts?sort=email&dir=asc&limit=3', key);
    expect(asc.body.data.map((c: any) => c.email)).toEqual(['user00@alpha.com', 'user01@beta.com', 'user02@beta.com']);
    const next = await svc.api.get(`/contacts?sort=email&dir=asc&limit=3&cursor=${asc.body.cursor}`, key);
    expect(next.body.data.map((c: any) => c.email)).toEqual(['user03@alpha.com', 'user04@beta.com', 'user05@beta.com']);
    const desc = await svc.api.get('/contacts?sort=email&dir=desc&limit=2', key);
    expect(desc.body.data.map((c: any) => c.email)).toEqual(['user44@beta.com', 'user43@beta.com']);
    const fallback = await svc.api.get('/contacts?sort=bogus&dir=sideways&limit=2', key);
    expect(fallback.body.data.map((c: any) => c.email)).toEqual(['user44@beta.com', 'user43@beta.com']);
  });

  test('the unfiltered total is the maintained count, and it follows inserts and deletes of every kind', async () => {
    const p = await freshProject();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await svc.api.post('/contacts', { email: `n${i}@count.test` }, p.key)).body.id);
    await svc.api.post('/v1/track', { email: 'tracked@count.test', event: 'x' }, { key: p.acct.project.publicKey });
    await svc.api.post('/v1/track', { email: 'tracked@count.test', event: 'x' }, { key: p.acct.project.publicKey });
    expect((await svc.api.get('/contacts', p.key)).body.total).toBe(6);
    // Folded or pending, the deltas add up to the same total.
    await foldFeedCounts(svc.orm.em.fork());
    const [{ pending }] = await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS pending FROM contact_count_deltas WHERE project_id = $1', [
      p.acct.project.id,
    ]);
    expect(pending).toBe(0);
    expect((await svc.api.get('/contacts', p.key)).body.total).toBe(6);
    await svc.api.delete(`/contacts/${ids[0]}`, p.key);
    await dbQuery(svc.databaseUrl, `DELETE FROM contacts WHERE id = ANY($1::uuid[])`, [ids.slice(1, 3)]);
    await dbQuery(
      svc.databaseUrl,
      `INSERT INTO contacts (id, project_id, email, subscribed)
       SELECT gen_random_uuid(), $1, 'bulk' || i || '@count.test', true FROM generate_series(1, 100) i`,
      [p.acct.project.id],
    );
    const [{ n }] = await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM contacts WHERE project_id = $1', [p.acct.project.id]);
    expect(n).toBe(103);
    expect((await svc.api.get('/contacts', p.key)).body.total).toBe(103);
    await foldFeedCounts(svc.orm.em.fork());
    expect((await svc.api.get('/contacts', p.key)).body.total).toBe(103);
  });

  test('an unknown cursor is 400', async () => {
    const res = await svc.api.get('/contacts?cursor=00000000-0000-4000-8000-000000000000', key);
    expect(res.status).toBe(400);
  });
});

describe('one contact', () => {
  test('GET, PATCH email/data/subscription, DELETE', async () => {
    const { acct, key } = await freshProject();
    const c = (await svc.api.post('/contacts', { email: 'p@example.com', data: { a: 1, b: 2 } }, key)).body;
    const got = await svc.api.get(`/contacts/${c.id}`, key);
    expect(got.body).toMatchObject({ id: c.id, email: 'p@example.com', data: { a: 1, b: 2 } });
    expect(got.body._meta).toBeUndefined();

    const patched = await svc.api.patch(`/contacts/${c.id}`, { email: 'P2@example.com', data: { a: null, c: 3 }, subscribed: false }, key);
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ email: 'p2@example.com', subscribed: false, data: { b: 2, c: 3 } });
    const events = await dbQuery(svc.databaseUrl, 'SELECT name FROM events WHERE contact_id = $1', [c.id]);
    expect(events.map((e) => e.name)).toEqual(['contact.unsubscribed']);

    await svc.api.post('/contacts', { email: 'taken@example.com' }, key);
    const clash = await svc.api.patch(`/contacts/${c.id}`, { email: 'taken@example.com' }, key);
    expect(clash.status).toBe(409);

    const del = await svc.api.delete(`/contacts/${c.id}`, key);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ id: c.id, deleted: true });
    expect((await svc.api.get(`/contacts/${c.id}`, key)).status).toBe(404);
    expect(await dbQuery(svc.databaseUrl, 'SELECT 1 FROM events WHERE contact_id = $1', [c.id])).toHaveLength(0);
    expect(await countContacts(acct.project.id)).toBe(1);
  });

  test('a PATCH that changes nothing records no event and keeps updatedAt', async () => {
    const { key } = await freshProject();
    const c = (await svc.api.post('/contacts', { email: 'same@example.com', data: { a: 1 } }, key)).body;
    const res = await svc.api.patch(`/contacts/${c.id}`, { subscribed: true, data: { a: 1 } }, key);
    expect(res.body.updatedAt).toBe(c.updatedAt);
    expect(await dbQuery(svc.databaseUrl, 'SELECT 1 FROM events WHERE contact_id = $1', [c.id])).toHaveLength(0);
  });
});

describe('snooze', () => {
  test('a snooze unsubscribes until the chosen end and records contact.unsubscribed with the reason', async () => {
    const { key } = await freshProject();
    const c = (await svc.api.post('/contacts', { email: 's@example.com' }, key)).body;
    const before = Date.now();
    const res = await svc.api.patch(`/contacts/${c.id}`, { snooze: '2_weeks' }, key);
    expect(res.status).toBe(200);
    expect(res.body.subscribed).toBe(false);
    const until = Date.parse(res.body.snoozedUntil);
    expect(until - before).toBeGreaterThanOrEqual(14 * 86400_000 - 5000);
    expect(until - before).toBeLessThanOrEqual(14 * 86400_000 + 60_000);
    const [ev] = await dbQuery(svc.databaseUrl, 'SELECT name, data FROM events WHERE contact_id = $1', [c.id]);
    expect(ev).toEqual({ name: 'contact.unsubscribed', data: { reason: 'snooze', snoozedUntil: res.body.snoozedUntil } });

    const list = await svc.api.get('/contacts?status=snoozed', key);
    expect(list.body.data.map((x: any) => x.id)).toEqual([c.id]);

    // Any write of subscribed ends the snooze.
    const resub = await svc.api.patch(`/contacts/${c.id}`, { subscribed: true }, key);
    expect(resub.body).toMatchObject({ subscribed: true, snoozedUntil: null });
  });

  test('snoozedUntil must be a future date-time and cannot be combined with subscribed', async () => {
    const { key } = await freshProject();
    const c = (await svc.api.post('/contacts', { email: 's2@example.com' }, key)).body;
    const past = await svc.api.patch(`/contacts/${c.id}`, { snoozedUntil: '2020-01-01T00:00:00Z' }, key);
    expect(past.status).toBe(422);
    expect(past.body.error.errors[0].field).toBe('snoozedUntil');
    const both = await svc.api.patch(`/contacts/${c.id}`, { snooze: '1_month', subscribed: true }, key);
    expect(both.status).toBe(422);
    const badDuration = await svc.api.patch(`/contacts/${c.id}`, { snooze: '3_days' }, key);
    expect(badDuration.status).toBe(422);
    const future = new Date(Date.now() + 3600_000).toISOString();
    const ok = await svc.api.patch(`/contacts/${c.id}`, { snoozedUntil: future }, key);
    expect(ok.body).toMatchObject({ subscribed: false, snoozedUntil: future });
    expect((await svc.api.get(`/contacts/${c.id}`, key)).body.subscribed).toBe(false);
  });
});

describe('POST /contacts/lookup', () => {
  test('answers found and missing for up to 500 normalised emails', async () => {
    const { key } = await freshProject();
    const a = (await svc.api.post('/contacts', { email: 'one@example.com' }, key)).body;
    const res = await svc.api.post('/contacts/lookup', { emails: ['ONE@example.com', 'two@example.com', 'one@example.com'] }, key);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ found: [{ id: a.id, email: 'one@example.com' }], missing: ['two@example.com'] });
    const many = Array.from({ length: 501 }, (_, i) => `x${i}@example.com`);
    const tooMany = await svc.api.post('/contacts/lookup', { emails: many }, key);
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.error.errors[0]).toMatchObject({ field: 'emails', code: 'too_big' });
    const ok500 = await svc.api.post('/contacts/lookup', { emails: many.slice(0, 500) }, key);
    expect(ok500.body.missing).toHaveLength(500);
  });
});
