import { dbQuery } from '../setup/db';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';

const SECRET = 'a shared secret for every process of this test';
let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
let acct: Account;
let key: { key: string };

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, JWT_SECRET: SECRET });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'track.test');
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});
beforeEach(() => {
  smtp.received.length = 0;
});

/** Sends one email through the real pipeline and returns what the SMTP listener received. */
async function deliver(body: Record<string, unknown>) {
  const res = await svc.api.post('/v1/send', { from: 'hi@track.test', subject: 'S', ...body }, key);
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  const [msg] = await smtp.waitFor(1);
  return { emailId: res.body.data.emails[0].email as string, contactId: res.body.data.emails[0].contact.id as string, html: String(msg.parsed.html), msg };
}

const hrefs = (html: string) => [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1].replace(/&amp;/g, '&'));
const pixelOf = (html: string) => /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(html)?.[1];
const path = (url: string) => url.slice(svc.api.baseUrl.length);
const row = async (id: string) => (await dbQuery(svc.databaseUrl, 'SELECT * FROM emails WHERE id = $1', [id]))[0];
const eventsOf = (contactId: string, name: string) =>
  dbQuery(svc.databaseUrl, 'SELECT data FROM events WHERE contact_id = $1 AND name = $2 ORDER BY created_at', [contactId, name]);

test('opens: the pixel counts every open, keeps the first time, and moves the status up', async () => {
  // Make sure the email is SENT before the open (so the order of states is real), then open twice.
  const { emailId, contactId, html } = await deliver({ to: 'open@example.org', body: '<html><body><p>Hi</p></body></html>' });
  const pixel = pixelOf(html)!;
  expect(pixel).toMatch(new RegExp(`^${svc.api.baseUrl}/t/o/${emailId}/[\\w-]{22}\\.gif$`));
  for (let i = 0; i < 2; i++) {
    const res = await svc.api.get(path(pixel));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/gif');
  }
  const r = await row(emailId);
  expect(r.open_count).toBe(2);
  expect(r.opened_at).toBeTruthy();
  expect(['OPENED']).toContain(r.status);
  const opens = await eventsOf(contactId, 'email.open');
  expect(opens.map((e) => e.data.isFirstOpen)).toEqual([true, false]);
  expect(opens[0].data).toMatchObject({ emailId, messageId: `<${emailId}@track.test>`, templateId: null, campaignId: null });
  // A forged token still gets an image, but counts nothing.
  expect((await svc.api.get(`/t/o/${emailId}/AAAAAAAAAAAAAAAAAAAAAA.gif`)).status).toBe(200);
  expect((await row(emailId)).open_count).toBe(2);
});

test('clicks: signed links redirect to their destination only; tampering is refused', async () => {
  const { emailId, contactId, html } = await deliver({
    to: 'click@example.org',
    body: '<p><a href="https://shop.example/item?id=1&amp;ref=mail">Item</a> <a href="mailto:x@y.z">mail</a> <a href="{{manageUrl}}">prefs</a></p>',
  });
  const [item, mailto, prefs] = hrefs(html);
  expect(item).toMatch(new RegExp(`^${svc.api.baseUrl}/t/c/${emailId}/`));
  expect(mailto).toBe('mailto:x@y.z');
  expect(prefs).toMatch(new RegExp(`^${svc.api.baseUrl}/manage/${contactId}\\?token=`));

  const res = await fetch(item, { redirect: 'manual' });
  expect(res.status).toBe(302);
  expect(res.headers.get('location')).toBe('https://shop.example/item?id=1&ref=mail');
  const r = await row(emailId);
  expect(r).toMatchObject({ status: 'CLICKED', click_count: 1 });
  expect(r.clicked_at).toBeTruthy();
  expect(r.opened_at).toBeTruthy();
  const clicks = await eventsOf(contactId, 'email.click');
  expect(clicks[0].data).toMatchObject({ emailId, link: 'https://shop.example/item?id=1&ref=mail' });

  const tampered = item.replace(/u=[^&]+/, `u=${encodeURIComponent('https://evil.example/')}`);
  const bad = await fetch(tampered, { redirect: 'manual' });
  expect(bad.status).toBe(400);
  expect(bad.headers.get('location')).toBeNull();
  expect((await row(emailId)).click_count).toBe(1);
  // Status never moves down: a later open leaves CLICKED.
  await svc.api.get(path(pixelOf(html)!));
  expect((await row(emailId)).status).toBe('CLICKED');
});

test('a tracked link leads where the browser would have gone: every HTML character reference in href is decoded', async () => {
  const { html } = await deliver({
    to: 'entities@example.org',
    body:
      '<p><a href="https://shop.example/a?x=1&#38;y=2">numeric</a> <a href="https://shop.example/b?x=1&#x26;y=2">hex</a>' +
      ' <a href="https://shop.example/c?q=caf&eacute;&amp;n=1">named</a> <a href="https://shop.example/d?x=1&copy=2">legacy</a></p>',
  });
  const destinations = [];
  for (const link of hrefs(html).filter((h) => h.includes('/t/c/'))) {
    destinations.push((await fetch(link, { redirect: 'manual' })).headers.get('location'));
  }
  // As a browser: &#38; and &#x26; are "&", &eacute; is "é" (sent percent-encoded), and "&copy=" stays
  // literal in an attribute because a legacy entity followed by "=" is not decoded there.
  expect(destinations).toEqual([
    'https://shop.example/a?x=1&y=2',
    'https://shop.example/b?x=1&y=2',
    'https://shop.example/c?q=caf%C3%A9&n=1',
    'https://shop.example/d?x=1&copy=2',
  ]);
});

test('a project can turn tracking off, or keep it for MARKETING mail only', async () => {
  await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings: { tracking: 'off' } }, { cookie: acct.cookie });
  const off = await deliver({ to: 'off@example.org', body: '<p><a href="https://a.example/">a</a></p>' });
  expect(pixelOf(off.html)).toBeUndefined();
  expect(hrefs(off.html)).toEqual(['https://a.example/']);
  smtp.received.length = 0;

  const settings = await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings: { tracking: 'marketing' } }, { cookie: acct.cookie });
  expect(settings.body.settings).toEqual({ tracking: 'marketing', trackOpens: true, trackClicks: true, unsubscribeFooter: true, doubleOptIn: false });
  const transactional = await deliver({ to: 'tx@example.org', body: '<p><a href="https://a.example/">a</a></p>' });
  expect(pixelOf(transactional.html)).toBeUndefined();
  smtp.received.length = 0;
  const tpl = (
    await svc.api.post(
      '/templates',
      { name: 'm', subject: 'm', body: '<p><a href="https://a.example/">a</a></p>', from: 'hi@track.test', type: 'MARKETING' },
      key,
    )
  ).body;
  const marketing = await deliver({ to: 'mk@example.org', template: tpl.id, subscribed: true });
  expect(pixelOf(marketing.html)).toBeDefined();
  expect(hrefs(marketing.html)[0]).toMatch(/\/t\/c\//);
  await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings: { tracking: 'all' } }, { cookie: acct.cookie });
  expect((await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings: { tracking: 'sometimes' } }, { cookie: acct.cookie })).status).toBe(422);
});

test('unsubscribe, subscribe and manage pages: GET shows, POST acts, RFC 8058 one-click works, never rate limited', async () => {
  const tpl = (await svc.api.post('/templates', { name: 'n', subject: 'n', body: '<p>news</p>', from: 'hi@track.test', type: 'MARKETING' }, key)).body;
  const { contactId, msg } = await deliver({ to: 'leaver@example.org', template: tpl.id, subscribed: true });
  const listUnsubscribe = msg.parsed.headerLines.find((h) => h.key === 'list-unsubscribe')!.line;
  const unsubscribeUrl = /<(.+)>/.exec(listUnsubscribe)![1];
  expect(unsubscribeUrl).toMatch(new RegExp(`^${svc.api.baseUrl}/unsubscribe/${contactId}\\?token=`));

  // Another API process with a limit of 1 request per minute per project: the pages do not count.
  const strict = await startTestService({ DATABASE_URL: svc.databaseUrl, JWT_SECRET: SECRET, RATE_LIMIT_PER_MINUTE: '1' }, 'api');
  try {
    await strict.api.get('/contacts', key);
    expect((await strict.api.get('/contacts', key)).status).toBe(429);
    for (let i = 0; i < 5; i++) {
      const page = await strict.api.get(path(unsubscribeUrl));
      expect(page.status).toBe(200);
      expect(page.body).toContain('leaver@example.org');
    }
  } finally {
    await strict.stop();
  }
  expect((await svc.api.get(`/contacts/${contactId}`, key)).body.subscribed).toBe(true);

  const oneClick = await svc.api.request('POST', path(unsubscribeUrl), {
    raw: 'List-Unsubscribe=One-Click',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  expect(oneClick.status).toBe(200);
  expect((await svc.api.get(`/contacts/${contactId}`, key)).body.subscribed).toBe(false);
  expect((await eventsOf(contactId, 'contact.unsubscribed')).map((e) => e.data)).toEqual([{ reason: 'one_click' }]);

  const subscribe = path(unsubscribeUrl).replace('/unsubscribe/', '/subscribe/');
  expect((await svc.api.get(subscribe)).body).toContain('Subscribe');
  expect((await svc.api.request('POST', subscribe)).status).toBe(200);
  expect((await svc.api.get(`/contacts/${contactId}`, key)).body.subscribed).toBe(true);
  const manage = await svc.api.get(path(unsubscribeUrl).replace('/unsubscribe/', '/manage/'));
  expect(manage.body).toContain('Email preferences for <b>leaver@example.org</b>');
  expect(manage.body).toMatch(/<input type="checkbox" id="unsubscribe-all" name="unsubscribeAll" value="1">/);
  expect((await svc.api.request('POST', path(unsubscribeUrl))).status).toBe(200);
  expect((await eventsOf(contactId, 'contact.unsubscribed')).map((e) => e.data.reason)).toEqual(['one_click', 'unsubscribe_link']);

  const forged = `/unsubscribe/${contactId}?token=AAAAAAAAAAAAAAAAAAAAAA`;
  expect((await svc.api.get(forged)).status).toBe(404);
  expect((await svc.api.request('POST', forged)).status).toBe(404);
});

test('tracking switches: the project, then a template or campaign, then the send decide opens and clicks; unsubscribe links stay', async () => {
  const owner = await createAccount(svc.api, 'Switches');
  const k = { key: owner.project.secretKey };
  await verifiedDomain(svc.api, dns, owner.project.secretKey, 'switch.test');
  const body = '<html><body><p><a href="https://shop.example/a">A</a></p></body></html>';
  const sendAs = async (extra: Record<string, unknown>) => {
    smtp.received.length = 0;
    const res = await svc.api.post('/v1/send', { from: 'hi@switch.test', to: 'sw@example.org', subject: 'S', body, ...extra }, k);
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
    const html = String((await smtp.waitFor(1))[0].parsed.html);
    return { pixel: !!pixelOf(html), clicks: hrefs(html).some((h) => h.includes('/t/c/')), plainLink: hrefs(html).includes('https://shop.example/a'), html };
  };

  // The project turns opens off: no pixel, links still tracked.
  const patched = await svc.api.patch(`/users/@me/projects/${owner.project.id}`, { tracking: { opens: false } }, { cookie: owner.cookie });
  expect(patched.body.tracking).toEqual({ opens: false, clicks: true });
  expect(await sendAs({})).toMatchObject({ pixel: false, clicks: true });

  // A template overrides the project (opens on, clicks off: the link exactly as written) ...
  const template = (
    await svc.api.post(
      '/templates',
      { name: 't', subject: 'S', body, from: 'hi@switch.test', type: 'TRANSACTIONAL', tracking: { opens: true, clicks: false } },
      k,
    )
  ).body;
  expect(template.tracking).toEqual({ opens: true, clicks: false });
  expect(await sendAs({ template: template.id, subject: undefined, body: undefined })).toMatchObject({ pixel: true, clicks: false, plainLink: true });
  // ... and a send overrides the template, switch by switch.
  expect(await sendAs({ template: template.id, subject: undefined, body: undefined, tracking: { clicks: true } })).toMatchObject({ pixel: true, clicks: true });
  expect((await svc.api.post('/v1/send', { from: 'hi@switch.test', to: 'x@example.org', subject: 'S', body, tracking: { pixel: true } }, k)).status).toBe(422);

  // A campaign with both off: no pixel, links as written, and its unsubscribe link still works.
  await svc.api.post('/contacts', { email: 'reader@example.org', subscribed: true }, k);
  const campaign = (
    await svc.api.post(
      '/campaigns',
      { name: 'c', subject: 'S', body, from: 'hi@switch.test', audienceType: 'ALL', tracking: { opens: false, clicks: false } },
      k,
    )
  ).body.data;
  expect(campaign.tracking).toEqual({ opens: false, clicks: false });
  smtp.received.length = 0;
  expect((await svc.api.post(`/campaigns/${campaign.id}/send`, {}, k)).status).toBe(200);
  const html = String((await smtp.waitFor(1))[0].parsed.html);
  expect(pixelOf(html)).toBeUndefined();
  expect(hrefs(html)).toContain('https://shop.example/a');
  expect(hrefs(html).some((h) => h.includes('/unsubscribe/'))).toBe(true);
});
