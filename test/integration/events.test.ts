import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc.stop());

const eventsOf = (contactId: string) => dbQuery(svc.databaseUrl, 'SELECT name, data FROM events WHERE contact_id = $1 ORDER BY created_at, name', [contactId]);

describe('POST /v1/track', () => {
  let acct: Account;
  beforeAll(async () => {
    acct = await createAccount(svc.api);
  });
  const track = (body: unknown, headers?: Record<string, string>) => svc.api.post('/v1/track', body, { key: acct.project.publicKey, headers });

  test('upserts a subscribed contact and records the event; answers contact, event and timestamp', async () => {
    const res = await track({ email: 'New@Example.com', event: 'signed_up', data: { plan: 'pro', seats: 3 } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: { contact: expect.any(String), event: expect.any(String), timestamp: expect.stringMatching(/Z$/) },
    });
    const contact = (await svc.api.get(`/contacts/${res.body.data.contact}`, { key: acct.project.secretKey })).body;
    expect(contact).toMatchObject({ email: 'new@example.com', subscribed: true, data: { plan: 'pro', seats: 3 } });
    expect(await eventsOf(contact.id)).toEqual([{ name: 'signed_up', data: { plan: 'pro', seats: 3 } }]);

    // Tracking again without an Idempotency-Key records a new event.
    const again = await track({ email: 'new@example.com', event: 'signed_up' });
    expect(again.body.data.contact).toBe(contact.id);
    expect(again.body.data.event).not.toBe(res.body.data.event);
    expect(await eventsOf(contact.id)).toHaveLength(2);
  });

  test('the data map: null deletes, empty string ignored, non-persistent values reach the event only', async () => {
    const first = await track({ email: 'dm@example.com', event: 'e1', data: { a: 1, b: 2 } });
    const id = first.body.data.contact;
    await track({ email: 'dm@example.com', event: 'e2', data: { a: null, b: '', t: { value: 'now', persistent: false }, svc_email: 'x' } });
    const contact = (await svc.api.get(`/contacts/${id}`, { key: acct.project.secretKey })).body;
    expect(contact.data).toEqual({ b: 2 });
    const events = await eventsOf(id);
    expect(events[1]).toEqual({ name: 'e2', data: { t: 'now' } });
  });

  test('subscribed: new contacts default to true; an explicit value sets it and each real change records one event', async () => {
    const r = await track({ email: 'sub@example.com', event: 'visit', subscribed: false });
    const id = r.body.data.contact;
    expect((await svc.api.get(`/contacts/${id}`, { key: acct.project.secretKey })).body.subscribed).toBe(false);
    expect((await eventsOf(id)).map((e) => e.name)).toEqual(['visit']);

    await track({ email: 'sub@example.com', event: 'visit', subscribed: true });
    await track({ email: 'sub@example.com', event: 'visit', subscribed: true });
    await track({ email: 'sub@example.com', event: 'visit' });
    const names = (await eventsOf(id)).map((e) => e.name).sort();
    expect(names.filter((n) => n === 'contact.subscribed')).toHaveLength(1);
    expect(names.filter((n) => n === 'visit')).toHaveLength(4);
  });

  test('concurrent tracks (written together in batches) each land once, merging data per contact', async () => {
    await track({ email: 'batch0@example.com', event: 'seed', data: { keep: 1, drop: 2 } });
    const bodies = Array.from({ length: 60 }, (_, i) => ({
      email: `batch${i % 6}@example.com`,
      event: 'burst',
      data: { [`k${i}`]: i, ...(i === 0 ? { drop: null } : {}) },
    }));
    const responses = await Promise.all(bodies.map((b) => track(b)));
    expect(responses.map((r) => r.status)).toEqual(bodies.map(() => 200));
    expect(new Set(responses.map((r) => r.body.data.event)).size).toBe(60);
    for (let c = 0; c < 6; c++) {
      const ids = new Set(responses.filter((_, i) => i % 6 === c).map((r) => r.body.data.contact));
      expect(ids.size).toBe(1);
      const [contactId] = ids;
      const burst = (await eventsOf(contactId)).filter((e) => e.name === 'burst');
      expect(burst).toHaveLength(10);
      const contact = (await svc.api.get(`/contacts/${contactId}`, { key: acct.project.secretKey })).body;
      const expected = Object.fromEntries(
        bodies
          .map((b, i) => [i, b])
          .filter(([i]) => (i as number) % 6 === c)
          .map(([i]) => [`k${i}`, i]),
      );
      expect(contact.data).toEqual(c === 0 ? { keep: 1, ...expected } : expected);
    }
  });

  test('concurrent tracks that flip subscription record exactly one change', async () => {
    const r = await track({ email: 'race@example.com', event: 'x', subscribed: true });
    await Promise.all(Array.from({ length: 10 }, () => track({ email: 'race@example.com', event: 'y', subscribed: false })));
    const names = (await eventsOf(r.body.data.contact)).map((e) => e.name);
    expect(names.filter((n) => n === 'contact.unsubscribed')).toHaveLength(1);
  });

  test.each(['email.open', 'email.sent', 'contact.subscribed', 'contact.unsubscribed', 'segment.vip-customers.entry', 'segment.x.exit'])(
    'reserved event name %s is 422 reserved_event and writes nothing',
    async (name) => {
      const res = await track({ email: `reserved-${name}@example.com`, event: name });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'event', code: 'reserved_event' })]);
      const rows = await dbQuery(svc.databaseUrl, 'SELECT 1 FROM contacts WHERE email = $1', [`reserved-${name}@example.com`]);
      expect(rows).toHaveLength(0);
    },
  );

  test('a NUL character anywhere in the body is 422 with its path, and writes nothing', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ email: 'nul1@example.com', event: 'x', data: { note: 'a\u0000b' } }, 'data.note'],
      [{ email: 'nul2@example.com', event: 'x', data: { tags: ['ok', 'b\u0000'] } }, 'data.tags.1'],
      [{ email: 'nul3@example.com', event: 'x', data: { 'k\u0000': 1 } }, 'data.k\u0000'],
      [{ email: 'nul4@example.com', event: 'x\u0000y' }, 'event'],
    ];
    for (const [body, field] of cases) {
      const res = await track(body);
      expect(res.status).toBe(422);
      expect(res.body.error.errors).toEqual([expect.objectContaining({ field, code: 'invalid_string' })]);
      expect(await dbQuery(svc.databaseUrl, 'SELECT 1 FROM contacts WHERE email = $1', [body.email])).toHaveLength(0);
    }
  });

  test('names that only look similar are allowed', async () => {
    for (const event of ['emailed', 'contact.created', 'segment.entry', 'segments.vip.entry']) {
      expect((await track({ email: 'ok@example.com', event })).status).toBe(200);
    }
  });

  test('/events/track is the secret-key alias', async () => {
    const res = await svc.api.post('/events/track', { email: 'alias@example.com', event: 'dash' }, { key: acct.project.secretKey });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
  });
});

describe('reading events', () => {
  let key: { key: string };
  let contactId: string;
  beforeAll(async () => {
    const acct = await createAccount(svc.api);
    key = { key: acct.project.secretKey };
    for (let i = 0; i < 25; i++) {
      const r = await svc.api.post('/events/track', { email: `r${i % 5}@example.com`, event: i % 2 ? 'odd' : 'even', data: { i } }, key);
      if (i === 0) contactId = r.body.data.contact;
    }
  });

  test('GET /events pages newest first with {id, name, contactId, data, createdAt}', async () => {
    const first = await svc.api.get('/events?limit=10', key);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ hasMore: true, total: 25 });
    expect(first.body.data[0]).toEqual({
      id: expect.any(String),
      name: 'even',
      contactId: expect.any(String),
      data: { i: 24 },
      createdAt: expect.any(String),
    });
    const all: number[] = first.body.data.map((e: any) => e.data.i);
    let cursor = first.body.cursor;
    for (;;) {
      const page = await svc.api.get(`/events?limit=10&cursor=${cursor}`, key);
      expect(page.body.total).toBe(0);
      all.push(...page.body.data.map((e: any) => e.data.i));
      if (!page.body.hasMore) break;
      cursor = page.body.cursor;
    }
    expect(all).toEqual(Array.from({ length: 25 }, (_, i) => 24 - i));
    const odd = await svc.api.get('/events?name=odd&limit=100', key);
    expect(odd.body.total).toBe(12);
  });

  test('GET /events/contact/:id lists one contact', async () => {
    const res = await svc.api.get(`/events/contact/${contactId}`, key);
    expect(res.body.data.map((e: any) => e.data.i)).toEqual([20, 15, 10, 5, 0]);
    expect(res.body.data.every((e: any) => e.contactId === contactId)).toBe(true);
  });

  test('names, stats and usage', async () => {
    const names = await svc.api.get('/events/names', key);
    expect(names.body.data).toEqual([
      { name: 'even', count: 13, lastTrackedAt: expect.any(String) },
      { name: 'odd', count: 12, lastTrackedAt: expect.any(String) },
    ]);
    const stats = await svc.api.get('/events/stats', key);
    expect(stats.body).toMatchObject({ totalEvents: 25, last24Hours: 25, uniqueEventNames: 2, uniqueContacts: 5 });
    expect(stats.body.topEvents[0]).toEqual({ name: 'even', count: 13 });
    const usage = await svc.api.get('/events/odd/usage', key);
    expect(usage.body).toEqual({ eventName: 'odd', segments: [], workflows: [], total: 0 });
  });

  test('GET /events/:name/usage names the segments filtering on it and the workflows triggered by, waiting for or branching on it', async () => {
    const triggered = (name: string) => ({ logic: 'AND', groups: [{ filters: [{ field: `event.${name}`, operator: 'triggered' }] }] });
    const buyers = (await svc.api.post('/segments', { name: 'Buyers', condition: triggered('purchase') }, key)).body;
    await svc.api.post('/segments', { name: 'Refunders', condition: triggered('purchase_refund') }, key);
    // A filter value that only reads like the event is no reference; a filter in a nested tree is one.
    await svc.api.post(
      '/segments',
      {
        name: 'From the shop page',
        condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.source', operator: 'equals', value: 'event.purchase' }] }] },
      },
      key,
    );
    const nested = (
      await svc.api.post('/segments', { name: 'Nested buyers', condition: { logic: 'OR', groups: [{ filters: [], conditions: triggered('purchase') }] } }, key)
    ).body;
    const onPurchase = (await svc.api.post('/workflows', { name: 'Thank buyers', eventName: 'purchase' }, key)).body;
    const waiting = (await svc.api.post('/workflows', { name: 'Checkout nudge', eventName: 'cart' }, key)).body;
    await svc.api.post(`/workflows/${waiting.id}/steps`, { type: 'WAIT_FOR_EVENT', name: 'wait', config: { eventName: 'purchase', timeout: 3600 } }, key);
    const branching = (await svc.api.post('/workflows', { name: 'Branch on buying', eventName: 'visit' }, key)).body;
    const cond = await svc.api.post(
      `/workflows/${branching.id}/steps`,
      { type: 'CONDITION', name: 'bought?', config: { field: 'event.purchase', operator: 'triggered' } },
      key,
    );
    expect(cond.status).toBe(201);
    const stranger = await createAccount(svc.api, 'Stranger');
    await svc.api.post('/workflows', { name: 'Theirs', eventName: 'purchase' }, { key: stranger.project.secretKey });

    const res = await svc.api.get('/events/purchase/usage', key);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      eventName: 'purchase',
      segments: [
        { id: buyers.id, name: 'Buyers' },
        { id: nested.id, name: 'Nested buyers' },
      ],
      workflows: [
        { id: branching.id, name: 'Branch on buying', usedAs: 'condition' },
        { id: waiting.id, name: 'Checkout nudge', usedAs: 'wait_for_event' },
        { id: onPurchase.id, name: 'Thank buyers', usedAs: 'trigger' },
      ],
      total: 5,
    });
  });

  test('DELETE /events/:name removes every event with that name, and refuses system names', async () => {
    const res = await svc.api.delete('/events/odd', key);
    expect(res.body).toEqual({ eventName: 'odd', deleted: 12 });
    expect((await svc.api.get('/events?name=odd', key)).body.total).toBe(0);
    expect((await svc.api.get('/events', key)).body.total).toBe(13);
    const sys = await svc.api.delete('/events/contact.subscribed', key);
    expect(sys.status).toBe(400);
  });
});
