/**
 * Double opt-in through the hosted subscribe form: the confirmation mail in the dev mailbox, its
 * signed link (GET shows, POST confirms, once, until it expires), the consent record, the expiry of
 * unconfirmed subscriptions by the maintenance schedule, and the form's abuse protection.
 */
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { FORM_CONFIRMATION_LIMITS } from '../../src/modules/consent/consent.service';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let svc: TestService;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  // No SMTP_URL: the built-in capture server, read through the dev mailbox as a user would.
  // TRUST_PROXY: a test speaks for visitors from several networks through X-Forwarded-For.
  svc = await startTestService({ DNS_SERVERS: dns.address, TRUST_PROXY: 'true' });
});
afterAll(async () => {
  await svc.stop();
  await dns.stop();
});

interface Mail {
  subject: string;
  text: string;
  html: string | null;
}

const mailTo = async (to: string): Promise<Mail[]> => (await svc.api.get(`/dev/mailbox?to=${encodeURIComponent(to)}`)).body.data;
const waitForMail = (to: string, subject: string | RegExp, count = 1) =>
  until(
    async () => {
      const mails = (await mailTo(to)).filter((m) => (typeof subject === 'string' ? m.subject === subject : subject.test(m.subject)));
      return mails.length >= count ? mails : undefined;
    },
    20_000,
    `${count} "${subject}" mail(s) to ${to}`,
  );
const confirmLinkOf = (mail: Mail) => {
  const m = /https?:\/\/[^\s"<>]+\/confirm\/[0-9a-f-]+\?token=[A-Za-z0-9_-]+/.exec(mail.text);
  if (!m) throw new Error(`no confirmation link in: ${mail.text}`);
  return m[0].slice(svc.api.baseUrl.length);
};

interface Project {
  acct: Account;
  key: { key: string };
  pk: string;
  from: string;
}

async function project(name: string, settings: Record<string, unknown> = { doubleOptIn: true }): Promise<Project> {
  const acct = await createAccount(svc.api, name);
  const domain = `${name.toLowerCase().replace(/\W/g, '')}.test`;
  await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  const patched = await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings }, { cookie: acct.cookie });
  if (patched.status !== 200) throw new Error(JSON.stringify(patched.body));
  return { acct, key: { key: acct.project.secretKey }, pk: acct.project.publicKey, from: `news@${domain}` };
}

async function topic(p: Project, name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await svc.api.post('/topics', { name, ...extra }, p.key);
  if (res.status !== 201) throw new Error(JSON.stringify(res.body));
  return res.body.id;
}

const subscribeAs = (p: Project, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  svc.api.post('/v1/subscribe', body, { key: p.pk, headers });

async function contactByEmail(p: Project, email: string) {
  const list = await svc.api.get(`/contacts?search=${encodeURIComponent(email)}`, p.key);
  const found = list.body.data.find((c: { email: string }) => c.email === email);
  return found ? (await svc.api.get(`/contacts/${found.id}`, p.key)).body : undefined;
}

test('subscribe → confirmation mail → GET shows, POST confirms → subscribed, with the proof of consent; the link works once', async () => {
  const p = await project('Optin Flow');
  // opt_out: only those who join receive it, so joining is what waits for the confirmation.
  const digest = await topic(p, 'Weekly digest', { defaultSubscription: 'opt_out' });
  const news = await topic(p, 'Product news', { defaultSubscription: 'opt_out' });
  const letters = await topic(p, 'Letters');

  const signup = await subscribeAs(p, { email: 'ann@example.org', topics: [digest], data: { firstName: 'Ann' } }, { 'user-agent': 'SignupBrowser/1.0' });
  expect(signup.status).toBe(200);
  expect(signup.body).toEqual({ success: true });

  const pending = await contactByEmail(p, 'ann@example.org');
  expect(pending).toMatchObject({ subscribed: false, data: { firstName: 'Ann' } });
  expect(pending.topics[digest]).toBe('pending');
  expect(pending.topics[news]).toBe('unsubscribed');

  const [mail] = await waitForMail('ann@example.org', 'Confirm your subscription to Optin Flow');
  expect(mail.text).toContain('Weekly digest');
  expect(mail.text).toContain('ann@example.org');
  const link = confirmLinkOf(mail);
  // The confirmation is mail of the project like any other: it is in its activity, once its outcome is
  // recorded, which follows the relay's answer (the mail can reach the relay first).
  const inFeed = async () => JSON.stringify((await svc.api.get('/activity', p.key)).body).includes('ann@example.org') || undefined;
  expect(await until(inFeed, 20_000, 'the confirmation in the activity feed')).toBe(true);

  // A link scanner's GET changes nothing.
  const shown = await svc.api.get(link, { headers: { 'user-agent': 'Scanner/1' } });
  expect(shown.status).toBe(200);
  expect(shown.body).toContain('<button type="submit">Confirm</button>');
  expect(shown.body).toContain('Weekly digest');
  expect((await contactByEmail(p, 'ann@example.org')).topics[digest]).toBe('pending');

  const confirmed = await svc.api.request('POST', link, { headers: { 'user-agent': 'ConfirmBrowser/2.0' } });
  expect(confirmed.status).toBe(200);
  expect(confirmed.body).toContain('Subscription confirmed');

  const contact = await contactByEmail(p, 'ann@example.org');
  expect(contact.subscribed).toBe(true);
  expect(contact.topics[digest]).toBe('subscribed');
  expect(contact.topics[news]).toBe('unsubscribed');
  expect(contact.topics[letters]).toBe('subscribed');

  const consent = await svc.api.get(`/contacts/${contact.id}/consent`, p.key);
  expect(consent.status).toBe(200);
  expect(consent.body.data).toEqual([
    expect.objectContaining({
      status: 'confirmed',
      source: 'subscribe_form',
      topicIds: [digest],
      subscribeAll: true,
      requestedIp: '127.0.0.1',
      requestedUserAgent: 'SignupBrowser/1.0',
      confirmedIp: '127.0.0.1',
      confirmedUserAgent: 'ConfirmBrowser/2.0',
      mailedAt: expect.any(String),
      confirmedAt: expect.any(String),
    }),
  ]);

  // contact.subscribed, globally and for the topic, in the project's events.
  const events = (await svc.api.get('/events?name=contact.subscribed', p.key)).body.data.filter((e: { contactId: string }) => e.contactId === contact.id);
  expect(events.map((e: { data: Record<string, unknown> }) => e.data)).toEqual(
    expect.arrayContaining([expect.objectContaining({ reason: 'double_opt_in' }), expect.objectContaining({ topicId: digest, source: 'double_opt_in' })]),
  );

  // Used: a clear page, for GET and POST; nothing changes.
  for (const method of ['GET', 'POST']) {
    const again = await svc.api.request(method, link);
    expect(again.status).toBe(410);
    expect(again.headers.get('content-type')).toMatch(/^text\/html/);
    expect(again.body).toContain('Link already used');
  }
  // A forged signature: not valid.
  const forged = link.replace(/token=.*/, 'token=AAAAAAAAAAAAAAAAAAAAAA');
  expect((await svc.api.get(forged)).status).toBe(404);
  expect((await svc.api.request('POST', forged)).body).toContain('Link not valid');
  expect((await svc.api.get('/confirm/not-a-uuid?token=x')).status).toBe(404);
});

test('an expired link gives a clear page; the unconfirmed subscription becomes unsubscribed and a campaign to the topic skips it', async () => {
  const p = await project('Optin Expiry');
  const t = await topic(p, 'Offers', { defaultSubscription: 'opt_out' });

  // Confirmed, pending, expired, left the topic, and unsubscribed from everything.
  for (const email of ['kept@example.org', 'waiting@example.org', 'late@example.org', 'left@example.org', 'gone@example.org']) {
    expect((await subscribeAs(p, { email, topics: [t] })).status).toBe(200);
  }
  for (const email of ['kept@example.org', 'left@example.org', 'gone@example.org']) {
    const [mail] = await waitForMail(email, /^Confirm your subscription/);
    expect((await svc.api.request('POST', confirmLinkOf(mail))).status).toBe(200);
  }
  const [lateMail] = await waitForMail('late@example.org', /^Confirm your subscription/);
  const lateLink = confirmLinkOf(lateMail);

  const left = await contactByEmail(p, 'left@example.org');
  expect((await svc.api.patch(`/contacts/${left.id}`, { topics: { [t]: false } }, p.key)).body.topics[t]).toBe('unsubscribed');
  const gone = await contactByEmail(p, 'gone@example.org');
  const goneNow = (await svc.api.patch(`/contacts/${gone.id}`, { subscribed: false }, p.key)).body;
  expect(goneNow).toMatchObject({ subscribed: false, topics: { [t]: 'subscribed' } });

  // Time passes for late@ only: its link and its pending state are older than CONFIRMATION_EXPIRY_HOURS.
  const late = await contactByEmail(p, 'late@example.org');
  await dbQuery(svc.databaseUrl, `UPDATE consent_confirmations SET expires_at = now() - interval '1 minute' WHERE contact_id = $1`, [late.id]);
  await dbQuery(svc.databaseUrl, `UPDATE contact_topics SET updated_at = now() - interval '73 hours' WHERE contact_id = $1`, [late.id]);

  for (const method of ['GET', 'POST']) {
    const expired = await svc.api.request(method, lateLink);
    expect(expired.status).toBe(410);
    expect(expired.body).toContain('Link expired');
  }
  expect((await contactByEmail(p, 'late@example.org')).topics[t]).toBe('pending');

  // The maintenance schedule, triggered as from the Web UI, expires it; the others stay as they were.
  await svc.temporal.client.schedule.getHandle('maintenance').trigger();
  await until(async () => ((await contactByEmail(p, 'late@example.org')).topics[t] === 'unsubscribed' ? true : undefined), 30_000, 'late@ unsubscribed');
  expect((await contactByEmail(p, 'waiting@example.org')).topics[t]).toBe('pending');
  expect((await contactByEmail(p, 'kept@example.org')).topics[t]).toBe('subscribed');

  const campaign = await svc.api.post(
    '/campaigns',
    { name: 'Offer', subject: 'This week’s offer', body: '<html><body><p>Offer</p></body></html>', from: p.from, audienceType: 'ALL', topicId: t },
    p.key,
  );
  expect(campaign.status).toBe(201);
  expect((await svc.api.post(`/campaigns/${campaign.body.data.id}/send`, {}, p.key)).status).toBeLessThan(300);
  await waitForMail('kept@example.org', 'This week’s offer');
  const sent = await until(async () => {
    const c = (await svc.api.get(`/campaigns/${campaign.body.data.id}`, p.key)).body;
    return c.status === 'SENT' ? c : undefined;
  });
  expect(sent.totalRecipients).toBe(1);
  for (const email of ['waiting@example.org', 'late@example.org', 'left@example.org', 'gone@example.org']) {
    expect((await mailTo(email)).filter((m) => m.subject === 'This week’s offer')).toEqual([]);
  }
});

test('the form answers the same for new, pending and confirmed addresses; honeypot, recent confirmation and rate limits', async () => {
  const p = await project('Optin Abuse');
  const t = await topic(p, 'Letters');
  const answers: Array<{ status: number; body: unknown }> = [];
  const ask = async (email: string, extra: Record<string, unknown> = {}) => {
    const res = await subscribeAs(p, { email, topics: [t], ...extra });
    answers.push({ status: res.status, body: res.body });
    return res;
  };

  await ask('new@example.org'); // new
  await ask('new@example.org'); // pending: a second mail (within the per-contact limit)
  await waitForMail('new@example.org', /^Confirm your subscription/, 2);
  expect((await svc.api.request('POST', confirmLinkOf((await mailTo('new@example.org'))[0]))).status).toBe(200);
  await ask('new@example.org'); // confirmed: nothing to ask
  // Confirmed within the hour: joining another topic waits, but no new mail goes out.
  const later = await topic(p, 'Later letters', { defaultSubscription: 'opt_out' });
  await ask('new@example.org', { topics: [later] });
  expect(answers.length).toBe(4);
  expect(new Set(answers.map((a) => JSON.stringify(a)))).toEqual(new Set([JSON.stringify({ status: 200, body: { success: true } })]));
  await new Promise((r) => setTimeout(r, 1500));
  expect((await mailTo('new@example.org')).length).toBe(2);
  const known = await contactByEmail(p, 'new@example.org');
  expect(known.topics[later]).toBe('pending');
  const [newest] = (await svc.api.get(`/contacts/${known.id}/consent`, p.key)).body.data;
  expect(newest).toMatchObject({ topicIds: [later], status: 'pending', mailedAt: null });

  // The honeypot: the same answer, and nothing is created or mailed.
  expect((await ask('bot@example.org', { _gotcha: 'http://spam.example' })).body).toEqual({ success: true });
  expect(await contactByEmail(p, 'bot@example.org')).toBeUndefined();

  // Validation still answers 422; an unknown topic is named.
  const bad = await subscribeAs(p, { email: 'not an address' });
  expect(bad.status).toBe(422);
  const unknown = await subscribeAs(p, { email: 'x@example.org', topics: ['00000000-0000-4000-8000-000000000000'] });
  expect(unknown.status).toBe(422);
  expect(JSON.stringify(unknown.body)).toContain('00000000-0000-4000-8000-000000000000');
  // The secret key is refused: the form is the public key's.
  expect((await svc.api.post('/v1/subscribe', { email: 'y@example.org' }, p.key)).status).toBe(401);

  // The HTML form: the key in the query, urlencoded fields, a small page back.
  const form = await svc.api.request('POST', `/v1/subscribe?key=${p.pk}`, {
    raw: `email=form%40example.org&topics=${t}&data%5Bcity%5D=Oslo`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  expect(form.status).toBe(200);
  expect(form.headers.get('content-type')).toMatch(/^text\/html/);
  expect(form.body).toContain('Thank you');
  // An opt_in topic needs no joining: the signup's global subscription is what waits for the confirmation.
  expect(await contactByEmail(p, 'form@example.org')).toMatchObject({ subscribed: false, data: { city: 'Oslo' }, topics: { [t]: 'subscribed' } });
  await waitForMail('form@example.org', /^Confirm your subscription/);
});

test('rate limits: per address and per IP on the form, and confirmation mails per contact', async () => {
  const p = await project('Optin Limits');
  const t = await topic(p, 'Daily');
  // Per address: 5 an hour; the 6th is 429 whether or not the address is known.
  for (let i = 0; i < 5; i++) expect((await subscribeAs(p, { email: 'same@example.org', topics: [t] })).status).toBe(200);
  const sixth = await subscribeAs(p, { email: 'same@example.org', topics: [t] });
  expect(sixth.status).toBe(429);
  expect(sixth.body.error.code).toBe('RATE_LIMIT_EXCEEDED');
  // Five requests, three confirmation mails: at most three per contact an hour.
  await waitForMail('same@example.org', /^Confirm your subscription/, 3);
  await new Promise((r) => setTimeout(r, 1500));
  expect((await mailTo('same@example.org')).length).toBe(3);
  const contact = await contactByEmail(p, 'same@example.org');
  const records = (await svc.api.get(`/contacts/${contact.id}/consent`, p.key)).body.data;
  expect(records.filter((r: { mailedAt: string | null }) => r.mailedAt).length).toBe(3);

  // Per IP: 20 an hour across addresses (6 used above).
  const statuses: number[] = [];
  for (let i = 0; i < 15; i++) statuses.push((await subscribeAs(p, { email: `visitor${i}@example.org` })).status);
  expect(statuses.slice(0, 14).every((s) => s === 200)).toBe(true);
  expect(statuses[14]).toBe(429);
});

test('the form never lifts an opt-out without a confirmation: it mails one instead, with double opt-in off or a topic exempt from it', async () => {
  // Double opt-in off: a contact who unsubscribed (as a complaint or a hard bounce leaves it) stays so.
  const off = await project('Optout Off', { doubleOptIn: false });
  const gone = (await svc.api.post('/contacts', { email: 'optout-gone@example.org', subscribed: true }, off.key)).body;
  expect((await svc.api.patch(`/contacts/${gone.id}`, { subscribed: false }, off.key)).body.subscribed).toBe(false);
  expect((await subscribeAs(off, { email: 'optout-gone@example.org' })).status).toBe(200);
  const [mail] = await waitForMail('optout-gone@example.org', /^Confirm your subscription/);
  expect((await contactByEmail(off, 'optout-gone@example.org')).subscribed).toBe(false);
  // Its owner confirming is what subscribes it again.
  expect((await svc.api.request('POST', confirmLinkOf(mail))).status).toBe(200);
  expect((await contactByEmail(off, 'optout-gone@example.org')).subscribed).toBe(true);
  // A new address is still subscribed at once with double opt-in off.
  expect((await subscribeAs(off, { email: 'optout-fresh@example.org' })).status).toBe(200);
  expect((await contactByEmail(off, 'optout-fresh@example.org')).subscribed).toBe(true);

  // Double opt-in on, a topic exempt from it: the unsubscribed contact is not subscribed again globally.
  const on = await project('Optout On');
  const open = await topic(on, 'Open news', { doubleOptIn: false, defaultSubscription: 'opt_out' });
  const left = (await svc.api.post('/contacts', { email: 'optout-left@example.org', subscribed: true }, on.key)).body;
  await svc.api.patch(`/contacts/${left.id}`, { subscribed: false }, on.key);
  expect((await subscribeAs(on, { email: 'optout-left@example.org', topics: [open] })).status).toBe(200);
  await waitForMail('optout-left@example.org', /^Confirm your subscription/);
  expect(await contactByEmail(on, 'optout-left@example.org')).toMatchObject({ subscribed: false, topics: { [open]: 'pending' } });
  // Nor a topic the contact left, while still subscribed to the rest.
  const stayed = (await svc.api.post('/contacts', { email: 'optout-stayed@example.org', subscribed: true, topics: { [open]: true } }, on.key)).body;
  await svc.api.patch(`/contacts/${stayed.id}`, { topics: { [open]: false } }, on.key);
  expect((await subscribeAs(on, { email: 'optout-stayed@example.org', topics: [open] })).status).toBe(200);
  await waitForMail('optout-stayed@example.org', /^Confirm your subscription/);
  expect((await contactByEmail(on, 'optout-stayed@example.org')).topics[open]).toBe('pending');
});

test('the form refuses a private topic as it refuses an unknown one (422), and joins no one to it', async () => {
  const p = await project('Private Topics');
  const hidden = await topic(p, 'Staff only', { public: false, doubleOptIn: false });
  const res = await subscribeAs(p, { email: 'outsider@example.org', topics: [hidden] });
  expect(res.status).toBe(422);
  expect(res.body.error.errors).toEqual([expect.objectContaining({ field: `topics.${hidden}`, code: 'unknown_topic' })]);
  expect(await contactByEmail(p, 'outsider@example.org')).toBeUndefined();
});

test('confirmation mails are limited per mailbox, however its address is spelled, and per network', async () => {
  const p = await project('Optin Mailbox');
  const spellings = ['victim@gmail.com', 'victim+1@gmail.com', 'Victim+2@gmail.com', 'v.i.c.t.i.m@gmail.com', 'vic.tim+3@googlemail.com', 'victim+4@gmail.com'];
  const statuses: number[] = [];
  for (const [i, email] of spellings.entries()) statuses.push((await subscribeAs(p, { email }, { 'x-forwarded-for': `192.0.2.${i + 1}` })).status);
  // The form's limit per address counts the mailbox: five requests, then 429.
  expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
  const addresses = [...new Set(spellings.map((e) => e.toLowerCase()))];
  const mailed = async () => (await Promise.all(addresses.map(mailTo))).flat().length;
  await until(async () => ((await mailed()) >= 3 ? true : undefined), 20_000, 'three confirmation mails');
  await new Promise((r) => setTimeout(r, 1500));
  expect(await mailed()).toBe(FORM_CONFIRMATION_LIMITS.perMailbox.limit);

  // One network (an IPv4 /24), many addresses, each from its own address in it: mails up to the network's limit.
  const q = await project('Optin Network');
  const limit = FORM_CONFIRMATION_LIMITS.perNetwork.limit;
  const readers = Array.from({ length: limit + 2 }, (_, i) => `reader${i}@network.example`);
  for (const [i, email] of readers.entries()) expect((await subscribeAs(q, { email }, { 'x-forwarded-for': `198.51.100.${i + 1}` })).status).toBe(200);
  const reached = async () => (await Promise.all(readers.map(mailTo))).filter((m) => m.length > 0).length;
  await until(async () => ((await reached()) >= limit ? true : undefined), 30_000, `${limit} confirmation mails`);
  await new Promise((r) => setTimeout(r, 1500));
  expect(await reached()).toBe(limit);
  // Another network is not held back.
  expect((await subscribeAs(q, { email: 'elsewhere@network.example' }, { 'x-forwarded-for': '203.0.113.9' })).status).toBe(200);
  await waitForMail('elsewhere@network.example', /^Confirm your subscription/);
});

test('the project edits the confirmation mail through a template named in its settings', async () => {
  const p = await project('Optin Template');
  const t = await topic(p, 'Recipes');
  const unknownTemplate = await svc.api.patch(
    `/users/@me/projects/${p.acct.project.id}`,
    { settings: { confirmationTemplateId: '00000000-0000-4000-8000-000000000000' } },
    { cookie: p.acct.cookie },
  );
  expect(unknownTemplate.status).toBe(422);
  expect(unknownTemplate.body.error.errors[0].field).toBe('settings.confirmationTemplateId');

  const template = await svc.api.post(
    '/templates',
    {
      name: 'Confirm',
      subject: 'Say yes to {{topics}}',
      body: '<html><body><p>{{email}}: join {{projectName}} ({{topics}}) at <a href="{{confirmUrl}}">this link</a> before {{expiresAt}}.</p></body></html>',
      from: p.from,
      fromName: 'The Kitchen',
      type: 'MARKETING',
    },
    p.key,
  );
  expect(template.status).toBe(201);
  const set = await svc.api.patch(
    `/users/@me/projects/${p.acct.project.id}`,
    { settings: { confirmationTemplateId: template.body.id } },
    { cookie: p.acct.cookie },
  );
  expect(set.status).toBe(200);
  expect(set.body.settings.confirmationTemplateId).toBe(template.body.id);

  // Sent as transactional mail even from a MARKETING template: the contact is not subscribed yet.
  expect((await subscribeAs(p, { email: 'cook@example.org', topics: [t] })).status).toBe(200);
  const [mail] = await waitForMail('cook@example.org', 'Say yes to Recipes');
  expect(mail.text).toContain('cook@example.org: join Optin Template (Recipes)');
  expect((await svc.api.request('POST', confirmLinkOf(mail))).body).toContain('Subscription confirmed');
  expect((await contactByEmail(p, 'cook@example.org')).topics[t]).toBe('subscribed');
});

test('PATCH /contacts/:id joining a topic with double opt-in leaves it pending and mails the confirmation', async () => {
  const p = await project('Optin Api');
  const t = await topic(p, 'Briefing', { defaultSubscription: 'opt_out' });
  const free = await topic(p, 'Free', { defaultSubscription: 'opt_out', doubleOptIn: false });
  const created = await svc.api.post('/contacts', { email: 'api@example.org', subscribed: true }, p.key);

  const patched = await svc.api.patch(
    `/contacts/${created.body.id}`,
    { topics: { [t]: true, [free]: true } },
    { ...p.key, headers: { 'user-agent': 'Backend/3' } },
  );
  expect(patched.status).toBe(200);
  expect(patched.body.topics).toEqual({ [t]: 'pending', [free]: 'subscribed' });
  const [mail] = await waitForMail('api@example.org', /^Confirm your subscription/);
  expect(mail.text).toContain('Briefing');
  expect(mail.text).not.toContain('Free');

  const [record] = (await svc.api.get(`/contacts/${created.body.id}/consent`, p.key)).body.data;
  expect(record).toMatchObject({ status: 'pending', source: 'api', topicIds: [t], subscribeAll: false, requestedUserAgent: 'Backend/3' });
  expect((await svc.api.request('POST', confirmLinkOf(mail))).status).toBe(200);
  expect((await contactByEmail(p, 'api@example.org')).topics[t]).toBe('subscribed');
  expect((await svc.api.get(`/contacts/00000000-0000-4000-8000-000000000000/consent`, p.key)).status).toBe(404);
});

/** The contact got its confirmation mail naming the topic, is pending in it, and its consent record says where the request came from. */
async function expectConfirmationAsked(p: Project, email: string, t: string, topicName: string, source: string) {
  const [mail] = await waitForMail(email, /^Confirm your subscription/);
  expect(mail.text).toContain(topicName);
  const contact = await contactByEmail(p, email);
  expect(contact.topics[t]).toBe('pending');
  expect((await svc.api.get(`/contacts/${contact.id}/consent`, p.key)).body.data[0]).toMatchObject({ source, topicIds: [t], status: 'pending' });
}

test('a CSV import with doubleOptIn=true leaves opt_out joins pending and mails each contact its confirmation', async () => {
  const p = await project('Optin Import');
  const t = await topic(p, 'Quarterly', { defaultSubscription: 'opt_out' });
  const form = new FormData();
  form.append('file', new Blob(['email,name\nimp1@example.org,One\nimp2@example.org,Two\n'], { type: 'text/csv' }), 'contacts.csv');
  form.append('topics', t);
  form.append('doubleOptIn', 'true');
  const res = await fetch(`${svc.api.baseUrl}/contacts/import`, { method: 'POST', body: form, headers: { authorization: `Bearer ${p.key.key}` } });
  expect(res.status).toBe(202);

  for (const email of ['imp1@example.org', 'imp2@example.org']) await expectConfirmationAsked(p, email, t, 'Quarterly', 'import');
});

test('bulk-subscribe to a topic with double opt-in leaves the joins pending and mails each contact its confirmation', async () => {
  const p = await project('Optin Bulk');
  const t = await topic(p, 'Monthly', { defaultSubscription: 'opt_out' });
  const ids: string[] = [];
  for (const email of ['bulk1@example.org', 'bulk2@example.org']) ids.push((await svc.api.post('/contacts', { email, subscribed: true }, p.key)).body.id);
  const res = await svc.api.post('/contacts/bulk-subscribe', { contactIds: ids, topicId: t }, p.key);
  expect(res.status).toBe(202);

  for (const email of ['bulk1@example.org', 'bulk2@example.org']) await expectConfirmationAsked(p, email, t, 'Monthly', 'bulk');
});
