import { ZoneDnsServer } from '../../src/dns/zone-server';
import { startCampaignSend } from '../../src/modules/campaigns/campaigns.service';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { type Received, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url });
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});
beforeEach(() => {
  smtp.received.length = 0;
});

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

    // Asking for the state it already has changes nothing and records nothing (ids in any case).
    expect((await svc.api.patch(`/contacts/${contact.id}`, { topics: { [optOut.toUpperCase()]: true } }, key)).status).toBe(200);
    const events = await eventsOf(contact.id);
    expect(events.map((e) => [e.name, e.data.topicId])).toEqual(
      expect.arrayContaining([
        ['contact.unsubscribed', optIn],
        ['contact.subscribed', optOut],
      ]),
    );
    expect(events).toHaveLength(2);
    expect(events.every((e) => e.data.source === 'api')).toBe(true);
    // The activity feed shows them like the global flag's, naming the topic.
    const feed = (await svc.api.get('/activity', key)).body.data;
    expect(feed).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          type: 'contact.unsubscribed',
          contact: { id: contact.id, email: 'reader@example.com' },
          data: { topicId: optIn, source: 'api' },
        }),
      ]),
    );
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

/** A project with a verified sender, a contact per address and helpers to set their topics. */
async function audience(name: string) {
  const { acct, key } = await freshProject();
  const domain = `${name}.test`;
  await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  const contact = async (local: string, body: Record<string, unknown> = {}) =>
    (await svc.api.post('/contacts', { email: `${local}@${domain}`, ...body }, key)).body.id as string;
  const setTopics = async (id: string, topics: Record<string, boolean>) => {
    const res = await svc.api.patch(`/contacts/${id}`, { topics }, key);
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    return res.body.topics as Record<string, string>;
  };
  return { acct, key, domain, from: `news@${domain}`, contact, setTopics };
}

const recipients = (got: Received[], domain: string) =>
  got
    .map((m) => m.envelope.to[0])
    .filter((to) => to.endsWith(`@${domain}`))
    .sort();
const header = (m: Received, name: string) => m.parsed.headerLines.find((h) => h.key === name)?.line.replace(/^[^:]+:\s*/, '');

describe('targeting a topic', () => {
  test('a campaign for a topic reaches exactly the contacts that receive it, each with an unsubscribe link for the topic', async () => {
    const a = await audience('reach');
    // News: everyone receives it unless they leave (joining again waits for a confirmation). Offers: only those who join.
    const news = (await svc.api.post('/topics', { name: 'News', doubleOptIn: true }, a.key)).body.id;
    const offers = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, a.key)).body.id;
    const byDefault = await a.contact('default');
    const left = await a.contact('left');
    const pending = await a.contact('pending');
    const everywhere = await a.contact('everywhere');
    const globallyOut = await a.contact('globally-out', { subscribed: false });
    expect(await a.setTopics(left, { [news]: false, [offers]: true })).toEqual({ [news]: 'unsubscribed', [offers]: 'subscribed' });
    await a.setTopics(pending, { [news]: false, [offers]: true });
    expect(await a.setTopics(pending, { [news]: true })).toEqual({ [news]: 'pending', [offers]: 'subscribed' });
    expect(await a.setTopics(everywhere, { [news]: true, [offers]: true })).toEqual({ [news]: 'subscribed', [offers]: 'subscribed' });
    await a.setTopics(globallyOut, { [offers]: true });
    void byDefault;

    const send = async (topicId: string | undefined, count: number) => {
      smtp.received.length = 0;
      const body = { name: 'x', subject: 'Hello', body: '<html><body><p>Hi</p></body></html>', from: a.from, audienceType: 'ALL', topicId };
      const created = await svc.api.post('/campaigns', body, a.key);
      expect(created.status).toBe(201);
      expect(created.body.data.topicId).toBe(topicId ?? null);
      expect((await svc.api.post(`/campaigns/${created.body.data.id}/send`, {}, a.key)).status).toBe(200);
      await until(async () => ((await svc.api.get(`/campaigns/${created.body.data.id}`, a.key)).body.status === 'SENT' ? true : undefined));
      await smtp.waitFor(count);
      // Only the campaign's mail: pending@'s double opt-in confirmation travels through the same SMTP server.
      return smtp.received.filter((m) => m.envelope.to[0].endsWith(`@${a.domain}`) && m.parsed.subject === 'Hello');
    };

    const newsMail = await send(news, 2);
    expect(recipients(newsMail, a.domain)).toEqual([`default@${a.domain}`, `everywhere@${a.domain}`]);
    for (const m of newsMail) {
      const unsubscribe = header(m, 'list-unsubscribe')!;
      expect(unsubscribe).toContain(`topic=${news}`);
      expect(header(m, 'list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
      // The footer link is the same topic link.
      expect(String(m.parsed.html)).toContain(unsubscribe.slice(1, -1).replace(/&/g, '&amp;'));
    }

    const offersMail = await send(offers, 3);
    expect(recipients(offersMail, a.domain)).toEqual([`everywhere@${a.domain}`, `left@${a.domain}`, `pending@${a.domain}`]);
    expect(header(offersMail[0], 'list-unsubscribe')).toContain(`topic=${offers}`);

    // Without a topic: every globally subscribed contact, and today's unsubscribe link.
    const allMail = await send(undefined, 4);
    expect(recipients(allMail, a.domain)).toEqual([`default@${a.domain}`, `everywhere@${a.domain}`, `left@${a.domain}`, `pending@${a.domain}`]);
    expect(header(allMail[0], 'list-unsubscribe')).not.toContain('topic=');
  });

  test('a recipient who leaves the topic after the audience was fixed is skipped', async () => {
    const a = await audience('late');
    const news = (await svc.api.post('/topics', { name: 'News' }, a.key)).body.id;
    await a.contact('stays');
    const leaves = await a.contact('leaves');
    const c = (await svc.api.post('/campaigns', { name: 'n', subject: 'News', body: '<p>n</p>', from: a.from, audienceType: 'ALL', topicId: news }, a.key)).body
      .data;
    // The audience is fixed (as the workflow's first step does), then the contact leaves, then delivery runs.
    await dbQuery(svc.databaseUrl, `UPDATE campaigns SET status = 'SCHEDULED' WHERE id = $1`, [c.id]);
    expect(await startCampaignSend(svc.orm.em.fork(), c.id)).toEqual({ proceed: true, recipients: 2 });
    await a.setTopics(leaves, { [news]: false });
    await svc.temporal.startCampaignWorkflow({ id: c.id, projectId: a.acct.project.id, scheduledFor: null });
    await until(async () => ((await svc.api.get(`/campaigns/${c.id}`, a.key)).body.status === 'SENT' ? true : undefined));
    await smtp.waitFor(1);
    expect(recipients(smtp.received, a.domain)).toEqual([`stays@${a.domain}`]);
  });

  test('one-click unsubscribe from a topic email leaves only that topic; the page names the topic', async () => {
    const a = await audience('oneclick');
    const news = (await svc.api.post('/topics', { name: 'Weekly news' }, a.key)).body.id;
    const offers = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, a.key)).body.id;
    const reader = await a.contact('reader');
    await a.setTopics(reader, { [offers]: true });
    const c = await svc.api.post('/campaigns', { name: 'n', subject: 'News', body: '<p>n</p>', from: a.from, audienceType: 'ALL', topicId: news }, a.key);
    await svc.api.post(`/campaigns/${c.body.data.id}/send`, {}, a.key);
    const [mail] = await smtp.waitFor(1);
    const url = new URL(header(mail, 'list-unsubscribe')!.slice(1, -1));
    const path = url.pathname + url.search;

    const shown = await svc.api.get(path);
    expect(shown.status).toBe(200);
    expect(shown.body).toContain('Weekly news');
    expect(shown.body).toContain('Unsubscribe from all');
    // The topic is signed with the contact: another topic in the same link is not valid.
    const swapped = path.replace(news, offers);
    expect(
      (await svc.api.request('POST', swapped, { raw: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status,
    ).toBe(404);

    const clicked = await svc.api.request('POST', path, {
      raw: 'List-Unsubscribe=One-Click',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(clicked.status).toBe(200);
    expect(clicked.body).toContain('Weekly news');
    const after = (await svc.api.get(`/contacts/${reader}`, a.key)).body;
    expect(after.subscribed).toBe(true);
    expect(after.topics).toEqual({ [news]: 'unsubscribed', [offers]: 'subscribed' });
    const events = await eventsOf(reader);
    expect(events.at(-1)).toEqual({ name: 'contact.unsubscribed', data: { topicId: news, source: 'one_click' } });
    expect((await svc.api.get(path)).body).toContain('receives no Weekly news email');

    // The topic deleted since (its campaign was sent): the link stops all marketing mail, as the reader asked.
    expect((await svc.api.delete(`/topics/${news}`, a.key)).status).toBe(200);
    expect((await svc.api.get(`/campaigns/${c.body.data.id}`, a.key)).body.topicId).toBeNull();
    expect((await svc.api.get(path)).body).toContain('Stop sending email to');
    await svc.api.request('POST', path, { raw: 'List-Unsubscribe=One-Click', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect((await svc.api.get(`/contacts/${reader}`, a.key)).body).toMatchObject({ subscribed: false, topics: { [offers]: 'subscribed' } });
  });

  test('an automation SEND_EMAIL step with a topic sends only to contacts that receive it', async () => {
    const a = await audience('flow');
    const offers = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, a.key)).body.id;
    const template = (await svc.api.post('/templates', { name: 'Deal', subject: 'A deal', body: '<p>deal</p>', from: a.from, type: 'MARKETING' }, a.key)).body;
    const w = (await svc.api.post('/workflows', { name: 'On visit', triggerConfig: { eventName: 'visit' } }, a.key)).body;
    const bad = await svc.api.post(`/workflows/${w.id}/steps`, { type: 'SEND_EMAIL', name: 'deal', config: { templateId: template.id, topicId: w.id } }, a.key);
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0]).toMatchObject({ field: 'config.topicId', code: 'unknown_topic' });
    const step = await svc.api.post(
      `/workflows/${w.id}/steps`,
      { type: 'SEND_EMAIL', name: 'deal', config: { templateId: template.id, topicId: offers } },
      a.key,
    );
    expect(step.status).toBe(201);
    await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: w.steps[0].id, toStepId: step.body.id }, a.key);
    expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, a.key)).status).toBe(200);
    // In use by a step: the topic stays.
    expect((await svc.api.delete(`/topics/${offers}`, a.key)).body.error.code).toBe('TOPIC_IN_USE');

    const joined = await a.contact('joined');
    await a.contact('never');
    await a.setTopics(joined, { [offers]: true });
    for (const who of ['joined', 'never']) await svc.api.post('/v1/track', { email: `${who}@${a.domain}`, event: 'visit' }, { key: a.acct.project.publicKey });
    const done = await until(async () => {
      const xs = (await svc.api.get(`/workflows/${w.id}/executions`, a.key)).body.data as Array<{ id: string; status: string }>;
      return xs.length === 2 && xs.every((x) => x.status === 'COMPLETED') ? xs : undefined;
    });
    await smtp.waitFor(1);
    expect(recipients(smtp.received, a.domain)).toEqual([`joined@${a.domain}`]);
    expect(header(smtp.received[0], 'list-unsubscribe')).toContain(`topic=${offers}`);
    const steps = await Promise.all(done.map(async (x) => (await svc.api.get(`/workflows/${w.id}/executions/${x.id}`, a.key)).body.steps[1].status));
    expect(steps.sort()).toEqual(['COMPLETED', 'SKIPPED']);
  });

  test('campaign topicId must be a topic of the project, on MARKETING mail; a topic in use by a draft stays', async () => {
    const a = await audience('checks');
    const { key: otherKey } = await freshProject();
    const theirs = (await svc.api.post('/topics', { name: 'Theirs' }, otherKey)).body.id;
    const mine = (await svc.api.post('/topics', { name: 'Mine' }, a.key)).body.id;
    const body = { name: 'x', subject: 's', body: '<p>b</p>', from: a.from, audienceType: 'ALL' };
    const foreign = await svc.api.post('/campaigns', { ...body, topicId: theirs }, a.key);
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.errors).toEqual([expect.objectContaining({ field: 'topicId', code: 'unknown_topic' })]);
    expect((await svc.api.post('/campaigns', { ...body, topicId: 'news' }, a.key)).status).toBe(422);
    const transactional = await svc.api.post('/campaigns', { ...body, type: 'TRANSACTIONAL', topicId: mine }, a.key);
    expect(transactional.status).toBe(422);
    expect(transactional.body.error.errors[0].field).toBe('topicId');

    const draft = (await svc.api.post('/campaigns', body, a.key)).body.data;
    expect(draft.topicId).toBeNull();
    const put = await svc.api.put(`/campaigns/${draft.id}`, { ...body, topicId: mine }, a.key);
    expect(put.body.data?.topicId ?? put.body.topicId).toBe(mine);
    const inUse = await svc.api.delete(`/topics/${mine}`, a.key);
    expect(inUse.status).toBe(409);
    expect(inUse.body.error.code).toBe('TOPIC_IN_USE');
    await svc.api.put(`/campaigns/${draft.id}`, { ...body, topicId: null }, a.key);
    expect((await svc.api.delete(`/topics/${mine}`, a.key)).status).toBe(200);
  });
});

describe('segments on topics', () => {
  test('topic.<id> subscribed / notSubscribed follow each contact’s state with defaults, live and in counts', async () => {
    const { key } = await freshProject();
    const news = (await svc.api.post('/topics', { name: 'News' }, key)).body.id;
    const offers = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, key)).body.id;
    const add = async (email: string, topics: Record<string, boolean> = {}) => {
      const id = (await svc.api.post('/contacts', { email }, key)).body.id;
      if (Object.keys(topics).length) await svc.api.patch(`/contacts/${id}`, { topics }, key);
      return id;
    };
    await add('plain@seg.test');
    await add('left@seg.test', { [news]: false });
    const joined = await add('joined@seg.test', { [offers]: true });
    const where = (topicId: string, operator: string) => ({ logic: 'AND', groups: [{ filters: [{ field: `topic.${topicId}`, operator }] }] });
    let n = 0;
    const members = async (condition: unknown) => {
      const s = await svc.api.post('/segments', { name: `topic segment ${++n}`, condition, trackMembership: true }, key);
      expect(s.status).toBe(201);
      const page = await svc.api.get(`/segments/${s.body.id}/contacts`, key);
      expect(s.body.memberCount).toBe(page.body.total);
      return { id: s.body.id as string, slug: `topic-segment-${n}`, emails: page.body.data.map((c: { email: string }) => c.email).sort() };
    };
    expect((await members(where(news, 'subscribed'))).emails).toEqual(['joined@seg.test', 'plain@seg.test']);
    expect((await members(where(news, 'notSubscribed'))).emails).toEqual(['left@seg.test']);
    const inOffers = await members(where(offers, 'subscribed'));
    expect(inOffers.emails).toEqual(['joined@seg.test']);

    // Live: leaving the topic is an exit of the tracked segment.
    await svc.api.patch(`/contacts/${joined}`, { topics: { [offers]: false } }, key);
    await svc.live.settled();
    const names = (await eventsOf(joined)).map((e) => e.name);
    expect(names).toContain(`segment.${inOffers.slug}.exit`);
    expect((await svc.api.get(`/segments/${inOffers.id}/contacts`, key)).body.total).toBe(0);

    const bad = await svc.api.post('/segments', { name: 'bad', condition: where(news, 'equals') }, key);
    expect(bad.status).toBe(400);
    const unknown = await svc.api.post('/segments', { name: 'unknown', condition: where('00000000-0000-4000-8000-000000000000', 'subscribed') }, key);
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toMatch(/topic .* does not exist/);
  });
});

describe('topics from CSV imports and bulk jobs', () => {
  async function importCsv(key: { key: string }, csv: string, fields: Record<string, string | string[]>) {
    const form = new FormData();
    form.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
    for (const [name, value] of Object.entries(fields)) for (const v of [value].flat()) form.append(name, v);
    const res = await fetch(`${svc.api.baseUrl}/contacts/import`, { method: 'POST', body: form, headers: { authorization: `Bearer ${key.key}` } });
    return { status: res.status, body: (await res.json()) as any };
  }
  const finishedImport = (key: { key: string }, jobId: string) =>
    until(async () => {
      const job = (await svc.api.get(`/contacts/import/${jobId}`, key)).body;
      return job.status === 'COMPLETED' || job.status === 'FAILED' ? job : undefined;
    });
  const stateOf = async (key: { key: string }, email: string) => {
    const id = (await svc.api.post('/contacts/lookup', { emails: [email] }, key)).body.found[0].id;
    return (await svc.api.get(`/contacts/${id}`, key)).body.topics as Record<string, string>;
  };

  test('an import joins its topics; a contact that left one keeps its choice; with doubleOptIn the joins are pending', async () => {
    const { key } = await freshProject();
    const offers = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, key)).body.id;
    const confirm = (await svc.api.post('/topics', { name: 'Confirmed', defaultSubscription: 'opt_out', doubleOptIn: true }, key)).body.id;
    const digest = (await svc.api.post('/topics', { name: 'Digest' }, key)).body.id;
    const leaver = (await svc.api.post('/contacts', { email: 'leaver@imp.test' }, key)).body.id;
    await svc.api.patch(`/contacts/${leaver}`, { topics: { [offers]: false, [digest]: false } }, key);

    const bad = await importCsv(key, 'email\nx@imp.test\n', { topics: `${offers},00000000-0000-4000-8000-000000000000` });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0]).toMatchObject({ field: 'topics', code: 'unknown_topic' });
    expect((await importCsv(key, 'email\nx@imp.test\n', { topics: 'digest' })).status).toBe(422);

    const res = await importCsv(key, 'email,name\nnew@imp.test,New\nleaver@imp.test,Leaver\n', { topics: [`${offers},${confirm}`, digest] });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ topics: [offers, confirm, digest], doubleOptIn: false });
    expect(await finishedImport(key, res.body.jobId)).toMatchObject({ status: 'COMPLETED', imported: 2 });
    // Without doubleOptIn the importer vouches for consent: even a double opt-in topic is joined at once.
    expect(await stateOf(key, 'new@imp.test')).toEqual({ [offers]: 'subscribed', [confirm]: 'subscribed', [digest]: 'subscribed' });
    expect(await stateOf(key, 'leaver@imp.test')).toEqual({ [offers]: 'unsubscribed', [confirm]: 'subscribed', [digest]: 'unsubscribed' });
    const newId = (await svc.api.post('/contacts/lookup', { emails: ['new@imp.test'] }, key)).body.found[0].id;
    expect((await eventsOf(newId)).map((e) => [e.name, e.data.topicId, e.data.source])).toEqual(
      expect.arrayContaining([
        ['contact.subscribed', offers, 'import'],
        ['contact.subscribed', confirm, 'import'],
      ]),
    );

    const asked = await importCsv(key, 'email\nasked@imp.test\n', { topics: `${offers},${confirm}`, doubleOptIn: 'true' });
    await finishedImport(key, asked.body.jobId);
    expect(await stateOf(key, 'asked@imp.test')).toEqual({ [offers]: 'subscribed', [confirm]: 'pending', [digest]: 'subscribed' });
  });

  test('bulk-subscribe and bulk-unsubscribe with a topicId join or leave only that topic', async () => {
    const { key } = await freshProject();
    const offers = (await svc.api.post('/topics', { name: 'Offers', defaultSubscription: 'opt_out' }, key)).body.id;
    const ids: string[] = [];
    for (const email of ['b1@bulk-topics.test', 'b2@bulk-topics.test']) ids.push((await svc.api.post('/contacts', { email }, key)).body.id);
    const finishedBulk = (jobId: string) =>
      until(async () => {
        const job = (await svc.api.get(`/contacts/bulk/${jobId}`, key)).body;
        return job.status === 'COMPLETED' ? job : undefined;
      });
    const missing = '00000000-0000-4000-8000-000000000000';

    const join = await svc.api.post('/contacts/bulk-subscribe', { contactIds: [...ids, missing], topicId: offers.toUpperCase() }, key);
    expect(join.status).toBe(202);
    expect(join.body).toMatchObject({ type: 'subscribe', topicId: offers });
    expect(await finishedBulk(join.body.jobId)).toMatchObject({ changed: 2, unchanged: 0, notFound: [missing] });
    for (const id of ids) expect((await svc.api.get(`/contacts/${id}`, key)).body.topics).toEqual({ [offers]: 'subscribed' });

    const leave = await svc.api.post('/contacts/bulk-unsubscribe', { contactIds: [ids[0]], topicId: offers }, key);
    expect(await finishedBulk(leave.body.jobId)).toMatchObject({ changed: 1 });
    const first = (await svc.api.get(`/contacts/${ids[0]}`, key)).body;
    expect(first).toMatchObject({ subscribed: true, topics: { [offers]: 'unsubscribed' } });
    expect((await eventsOf(ids[0])).at(-1)).toMatchObject({ name: 'contact.unsubscribed', data: { topicId: offers, source: 'bulk', jobId: leave.body.jobId } });

    const onDelete = await svc.api.post('/contacts/bulk-delete', { contactIds: ids, topicId: offers }, key);
    expect(onDelete.status).toBe(422);
    expect(onDelete.body.error.errors[0].field).toBe('topicId');
    const foreign = await svc.api.post('/contacts/bulk-subscribe', { contactIds: ids, topicId: missing }, key);
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.errors[0]).toMatchObject({ field: 'topicId', code: 'unknown_topic' });
    expect((await svc.api.get(`/contacts/${ids[1]}`, key)).body.subscribed).toBe(true);
  });
});
