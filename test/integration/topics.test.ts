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

const eventsOf = async (contactId: string) =>
  dbQuery<{ name: string; data: Record<string, unknown> }>(svc.databaseUrl, 'SELECT name, data FROM events WHERE contact_id = $1 ORDER BY created_at, id', [
    contactId,
  ]);

describe('topics CRUD', () => {
  test('create answers 201 with the defaults; get, list, patch and delete work in the project', async () => {
    const { key } = await freshProject();
    const created = await svc.api.post('/topics', { name: 'Weekly digest', description: 'Every Monday' }, key);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: 'Weekly digest',
      description: 'Every Monday',
      defaultSubscription: 'opt_in',
      public: true,
      doubleOptIn: null,
    });
    expect(created.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(Date.parse(created.body.createdAt)).not.toBeNaN();
    const id = created.body.id;

    const other = await svc.api.post('/topics', { name: 'Product news', defaultSubscription: 'opt_out', public: false, doubleOptIn: true }, key);
    expect(other.body).toMatchObject({ defaultSubscription: 'opt_out', public: false, doubleOptIn: true });

    expect((await svc.api.get(`/topics/${id}`, key)).body).toEqual(created.body);

    const list = await svc.api.get('/topics?sort=name&dir=asc', key);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 2, page: 1, pageSize: 20, totalPages: 1 });
    expect(list.body.data.map((t: { name: string }) => t.name)).toEqual(['Product news', 'Weekly digest']);
    const searched = await svc.api.get('/topics?search=monday', key);
    expect(searched.body.data.map((t: { id: string }) => t.id)).toEqual([id]);

    const patched = await svc.api.patch(`/topics/${id}`, { name: 'Digest', public: false, doubleOptIn: false }, key);
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id, name: 'Digest', description: 'Every Monday', public: false, doubleOptIn: false });
    const reset = await svc.api.patch(`/topics/${id}`, { doubleOptIn: null, description: null }, key);
    expect(reset.body).toMatchObject({ doubleOptIn: null, description: null });

    expect((await svc.api.delete(`/topics/${id}`, key)).body).toEqual({ id, deleted: true });
    expect((await svc.api.get(`/topics/${id}`, key)).status).toBe(404);
    expect((await svc.api.get('/topics', key)).body.total).toBe(1);
  });

  test('bad input is 422 naming the field, a taken name 409, another project’s topic 404', async () => {
    const { acct, key } = await freshProject();
    const { key: otherKey } = await freshProject();
    const missing = await svc.api.post('/topics', { description: 'no name' }, key);
    expect(missing.status).toBe(422);
    expect(missing.body.error.errors[0]).toMatchObject({ field: 'name' });
    const badDefault = await svc.api.post('/topics', { name: 'x', defaultSubscription: 'maybe' }, key);
    expect(badDefault.status).toBe(422);
    expect(badDefault.body.error.errors[0]).toMatchObject({ field: 'defaultSubscription' });
    const badPublic = await svc.api.post('/topics', { name: 'x', public: 'yes' }, key);
    expect(badPublic.status).toBe(422);
    expect(badPublic.body.error.errors[0]).toMatchObject({ field: 'public', code: 'invalid_type' });

    const topic = await svc.api.post('/topics', { name: 'News' }, key);
    const again = await svc.api.post('/topics', { name: 'News' }, key);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('TOPIC_EXISTS');
    // Names are the project's own: another project may use the same one.
    expect((await svc.api.post('/topics', { name: 'News' }, otherKey)).status).toBe(201);
    const second = await svc.api.post('/topics', { name: 'Offers' }, key);
    expect((await svc.api.patch(`/topics/${second.body.id}`, { name: 'News' }, key)).status).toBe(409);
    expect((await svc.api.patch(`/topics/${topic.body.id}`, { name: '' }, key)).status).toBe(422);

    for (const res of [
      await svc.api.get(`/topics/${topic.body.id}`, otherKey),
      await svc.api.patch(`/topics/${topic.body.id}`, { name: 'Mine' }, otherKey),
      await svc.api.delete(`/topics/${topic.body.id}`, otherKey),
    ]) {
      expect(res.status).toBe(404);
    }
    expect((await svc.api.get('/topics/not-a-uuid', key)).status).toBe(422);
    expect((await svc.api.get('/topics', { key: 'nope' })).status).toBe(401);
    // A secret-key resource: the public key cannot read it.
    expect((await svc.api.get('/topics', { key: acct.project.publicKey })).status).toBe(401);
  });
});

describe('a contact’s topics', () => {
  test('GET shows every topic with defaults; PATCH joins and leaves, recording events', async () => {
    const { key } = await freshProject();
    const optIn = (await svc.api.post('/topics', { name: 'Digest' }, key)).body.id;
    const optOut = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, key)).body.id;
    const contact = (await svc.api.post('/contacts', { email: 'reader@example.com' }, key)).body;

    const fresh = await svc.api.get(`/contacts/${contact.id}`, key);
    expect(fresh.body.topics).toEqual({ [optIn]: 'subscribed', [optOut]: 'unsubscribed' });

    const changed = await svc.api.patch(`/contacts/${contact.id}`, { topics: { [optIn]: false, [optOut]: true } }, key);
    expect(changed.status).toBe(200);
    expect(changed.body.topics).toEqual({ [optIn]: 'unsubscribed', [optOut]: 'subscribed' });
    expect(changed.body.subscribed).toBe(true);
    expect((await svc.api.get(`/contacts/${contact.id}`, key)).body.topics).toEqual({ [optIn]: 'unsubscribed', [optOut]: 'subscribed' });

    // Asking for the state it already has changes nothing and records nothing.
    await svc.api.patch(`/contacts/${contact.id}`, { topics: { [optOut]: true } }, key);
    const events = await eventsOf(contact.id);
    expect(events.map((e) => [e.name, e.data.topicId])).toEqual(
      expect.arrayContaining([
        ['contact.unsubscribed', optIn],
        ['contact.subscribed', optOut],
      ]),
    );
    expect(events).toHaveLength(2);
    expect(events.every((e) => e.data.source === 'api')).toBe(true);
  });

  test('with double opt-in a join is pending (project setting, or the topic’s own), and leaving still works', async () => {
    const { acct, key } = await freshProject();
    const follows = (await svc.api.post('/topics', { name: 'Follows project', defaultSubscription: 'opt_out' }, key)).body.id;
    const never = (await svc.api.post('/topics', { name: 'Never', defaultSubscription: 'opt_out', doubleOptIn: false }, key)).body.id;
    const always = (await svc.api.post('/topics', { name: 'Always', defaultSubscription: 'opt_out', doubleOptIn: true }, key)).body.id;
    const contact = (await svc.api.post('/contacts', { email: 'careful@example.com' }, key)).body;

    const before = await svc.api.patch(`/contacts/${contact.id}`, { topics: { [follows]: true, [never]: true, [always]: true } }, key);
    expect(before.body.topics).toEqual({ [follows]: 'subscribed', [never]: 'subscribed', [always]: 'pending' });

    const settings = await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings: { doubleOptIn: true } }, { cookie: acct.cookie });
    expect(settings.status).toBe(200);
    expect(settings.body.settings.doubleOptIn).toBe(true);
    const other = (await svc.api.post('/contacts', { email: 'second@example.com' }, key)).body;
    const after = await svc.api.patch(`/contacts/${other.id}`, { topics: { [follows]: true, [never]: true, [always]: true } }, key);
    expect(after.body.topics).toEqual({ [follows]: 'pending', [never]: 'subscribed', [always]: 'pending' });
    // A pending join records no subscription: confirming it does.
    expect((await eventsOf(other.id)).map((e) => e.data.topicId)).toEqual([never]);

    // Already subscribed stays subscribed; a pending one can be left.
    const again = await svc.api.patch(`/contacts/${contact.id}`, { topics: { [follows]: true, [always]: false } }, key);
    expect(again.body.topics).toEqual({ [follows]: 'subscribed', [never]: 'subscribed', [always]: 'unsubscribed' });
  });

  test('a topic id of another project, or not a uuid, is 422 naming it, and nothing changes', async () => {
    const { key } = await freshProject();
    const { key: otherKey } = await freshProject();
    const mine = (await svc.api.post('/topics', { name: 'Mine', defaultSubscription: 'opt_out' }, key)).body.id;
    const theirs = (await svc.api.post('/topics', { name: 'Theirs' }, otherKey)).body.id;
    const contact = (await svc.api.post('/contacts', { email: 'x@example.com' }, key)).body;

    const foreign = await svc.api.patch(`/contacts/${contact.id}`, { topics: { [mine]: true, [theirs]: true }, data: { plan: 'pro' } }, key);
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.errors).toEqual([expect.objectContaining({ field: `topics.${theirs}`, code: 'unknown_topic' })]);
    const notUuid = await svc.api.patch(`/contacts/${contact.id}`, { topics: { digest: true } }, key);
    expect(notUuid.status).toBe(422);
    expect(notUuid.body.error.errors[0].field).toMatch(/^topics/);
    const notBoolean = await svc.api.patch(`/contacts/${contact.id}`, { topics: { [mine]: 'yes' } }, key);
    expect(notBoolean.status).toBe(422);

    const now = await svc.api.get(`/contacts/${contact.id}`, key);
    expect(now.body.topics).toEqual({ [mine]: 'unsubscribed' });
    expect(now.body.data).toEqual({});
  });

  test('deleting a topic removes it from every contact', async () => {
    const { key } = await freshProject();
    const topic = (await svc.api.post('/topics', { name: 'Gone soon' }, key)).body.id;
    const contact = (await svc.api.post('/contacts', { email: 'y@example.com' }, key)).body;
    await svc.api.patch(`/contacts/${contact.id}`, { topics: { [topic]: false } }, key);
    await svc.api.delete(`/topics/${topic}`, key);
    expect((await svc.api.get(`/contacts/${contact.id}`, key)).body.topics).toEqual({});
  });
});
