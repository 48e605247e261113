import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { type Received, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

/**
 * A/B tests end to end: the real service, its Temporal dev server and an SMTP capture. A variant is
 * told apart by its subject ("Variant A", ...); the rest of the audience gets the winner's.
 */

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, CAMPAIGN_BATCH_SIZE: '7' });
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});

type Key = { key: string };

async function setup(name: string, recipients: number) {
  const acct = await createAccount(svc.api, name);
  const key = { key: acct.project.secretKey };
  const domain = `${name.toLowerCase().replace(/\W/g, '')}.test`;
  await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  await dbQuery(
    svc.databaseUrl,
    `INSERT INTO contacts (id, project_id, email, subscribed, data)
     SELECT gen_random_uuid(), $1, 'r' || i || '@' || $3, true, '{}'::jsonb FROM generate_series(1, $2) AS i`,
    [acct.project.id, recipients, domain],
  );
  return { acct, key, domain, from: `news@${domain}` };
}

const variants = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    subject: `Variant ${'ABCD'[i]}`,
    body: `<p>Body ${'ABCD'[i]} <a href="https://shop.example/${'ABCD'[i]}">buy</a></p>`,
  }));

async function abCampaign(key: Key, from: string, abTest: Record<string, unknown>) {
  const res = await svc.api.post('/campaigns', { name: 'AB', subject: 'Plain', body: '<p>Plain</p>', from, audienceType: 'ALL', abTest }, key);
  expect(res.status).toBe(201);
  return res.body.data as { id: string; abTest: any };
}

const get = async (key: Key, id: string) => (await svc.api.get(`/campaigns/${id}`, key)).body;
const whenStatus = (key: Key, id: string, status: string, ms = 120_000) =>
  until(async () => ((await get(key, id)).status === status ? true : undefined), ms, `campaign ${status}`);
const mailTo = (domain: string) => smtp.received.filter((m) => m.envelope.to[0].endsWith(`@${domain}`));
const subjectsBy = (got: Received[]) => Map.groupBy(got, (m) => m.envelope.to[0]);
const rows = (id: string) =>
  dbQuery(svc.databaseUrl, `SELECT id, to_email, variant_id, status FROM emails WHERE campaign_id = $1 ORDER BY to_email`, [id]) as Promise<
    Array<{ id: string; to_email: string; variant_id: string | null; status: string }>
  >;
const pixelOf = (html: string) => /<img src="([^"]+\/t\/o\/[^"]+)"/.exec(html)?.[1];
const linkOf = (html: string) => /href="([^"]+\/t\/c\/[^"]+)"/.exec(html)?.[1].replace(/&amp;/g, '&');

/** Every recipient got exactly one message, all of one variant, and it matches their email record. */
async function oneVariantEach(id: string, domain: string, recipients: number) {
  const byRecipient = subjectsBy(mailTo(domain));
  expect(byRecipient.size).toBe(recipients);
  for (const [, got] of byRecipient) expect(got).toHaveLength(1);
  const records = await rows(id);
  expect(records).toHaveLength(recipients);
  for (const r of records) expect(byRecipient.get(r.to_email)![0].parsed.subject).toBe(`Variant ${r.variant_id}`);
}

test('validation: 2 to 4 variants, testPercent 5 to 50, waitMinutes 1 to 10080, a criterion; ids are A, B, ...', async () => {
  const { key, from } = await setup('AbRules', 1);
  const ok = { variants: variants(2), testPercent: 20, waitMinutes: 60, winnerCriteria: 'opens' };
  const bad = [
    { ...ok, variants: variants(1) },
    { ...ok, variants: [...variants(4), { subject: 'E' }] },
    { ...ok, testPercent: 4 },
    { ...ok, testPercent: 51 },
    { ...ok, waitMinutes: 0 },
    { ...ok, waitMinutes: 10081 },
    { ...ok, winnerCriteria: 'replies' },
  ];
  for (const abTest of bad) {
    const res = await svc.api.post('/campaigns', { name: 'x', subject: 's', body: 'b', from, audienceType: 'ALL', abTest }, key);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors[0].field).toMatch(/^abTest\./);
  }
  const unverified = await svc.api.post(
    '/campaigns',
    { name: 'x', subject: 's', body: 'b', from, audienceType: 'ALL', abTest: { ...ok, variants: [{ from: 'x@elsewhere.test' }, {}] } },
    key,
  );
  expect(unverified.status).toBe(403);
  const c = await abCampaign(key, from, ok);
  expect(c.abTest).toEqual({ ...ok, variants: variants(2).map((v, i) => ({ id: 'AB'[i], ...v })), winnerVariantId: null, phase: null });
  const both = await svc.api.put(
    `/campaigns/${c.id}`,
    {
      name: 'x',
      subject: 's',
      body: 'b',
      from,
      audienceType: 'ALL',
      abTest: ok,
      localTime: { at: '09:00', date: '2030-01-01', defaultTimezone: 'UTC', pastPolicy: 'skip' },
    },
    key,
  );
  expect(both.status).toBe(422);
  expect(both.body.error.errors[0].field).toBe('localTime');
  const notAb = (await svc.api.post('/campaigns', { name: 'x', subject: 's', body: 'b', from, audienceType: 'ALL' }, key)).body.data;
  expect((await svc.api.post(`/campaigns/${notAb.id}/winner`, { variantId: 'A' }, key)).status).toBe(400);
});

test('opens decide: the sample is split evenly, opens of B through the pixel make B the winner, and only B goes to the rest', async () => {
  const N = 40;
  const { key, domain, from, acct } = await setup('AbOpens', N + 2);
  // Left out before the split: unsubscribed contacts, and a suppressed address.
  await svc.api.post('/contacts', { email: `out@${domain}`, subscribed: false }, key);
  await dbQuery(svc.databaseUrl, `UPDATE contacts SET subscribed = false WHERE project_id = $1 AND email = $2`, [acct.project.id, `r${N + 1}@${domain}`]);
  expect((await svc.api.post('/suppressions', { emails: [`r${N + 2}@${domain}`] }, key)).status).toBe(200);
  const c = await abCampaign(key, from, { variants: variants(2), testPercent: 50, waitMinutes: 1, winnerCriteria: 'opens' });
  expect((await svc.api.post(`/campaigns/${c.id}/send`, {}, key)).status).toBe(200);

  // round(40 × 50 / 100) = 20 recipients, 10 of each; the other 20 wait.
  await whenStatus(key, c.id, 'TESTING');
  const sample = mailTo(domain);
  expect(sample).toHaveLength(20);
  const bySubject = Map.groupBy(sample, (m) => m.parsed.subject);
  expect(bySubject.get('Variant A')).toHaveLength(10);
  expect(bySubject.get('Variant B')).toHaveLength(10);
  expect(String(bySubject.get('Variant B')![0].parsed.html)).toContain('Body B');
  const waiting = await get(key, c.id);
  expect(waiting.abTest).toMatchObject({ phase: 'waiting', winnerVariantId: null });
  expect(waiting.abTest.variants.map((v: any) => [v.id, v.sent])).toEqual([
    ['A', 10],
    ['B', 10],
  ]);
  // Three of B's recipients open it (one twice), through the real tracking pixel; none of A's does.
  for (const m of [...bySubject.get('Variant B')!.slice(0, 3), bySubject.get('Variant B')![0]]) {
    expect((await fetch(pixelOf(String(m.parsed.html))!)).status).toBe(200);
  }
  expect((await get(key, c.id)).abTest.variants.map((v: any) => v.opened)).toEqual([0, 3]);

  await whenStatus(key, c.id, 'SENT');
  await oneVariantEach(c.id, domain, N);
  const rest = mailTo(domain).slice(20);
  expect(rest.map((m) => m.parsed.subject)).toEqual(Array(20).fill('Variant B'));
  const done = await get(key, c.id);
  expect(done.abTest).toMatchObject({ phase: 'done', winnerVariantId: 'B' });
  expect(done.abTest.variants.map((v: any) => [v.id, v.sent, v.opened])).toEqual([
    ['A', 10, 0],
    ['B', 30, 3],
  ]);
  const leftOut = [`out@${domain}`, `r${N + 1}@${domain}`, `r${N + 2}@${domain}`];
  expect(mailTo(domain).filter((m) => leftOut.includes(m.envelope.to[0]))).toEqual([]);
  const [sentEvent] = await dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE project_id = $1 AND name = 'email.sent' LIMIT 1`, [acct.project.id]);
  expect(sentEvent.data.variantId).toMatch(/^[AB]$/);
}, 240_000);

test('clicks decide among three variants split 4/3/3; a second winner call is 409', async () => {
  const N = 40;
  const { key, domain, from } = await setup('AbClicks', N);
  const c = await abCampaign(key, from, { variants: variants(3), testPercent: 25, waitMinutes: 1, winnerCriteria: 'clicks' });
  await svc.api.post(`/campaigns/${c.id}/send`, {}, key);
  await whenStatus(key, c.id, 'TESTING');
  const sample = mailTo(domain);
  expect(sample).toHaveLength(10);
  const bySubject = Map.groupBy(sample, (m) => m.parsed.subject);
  expect([...bySubject].map(([s, got]) => [s, got.length]).sort()).toEqual([
    ['Variant A', 4],
    ['Variant B', 3],
    ['Variant C', 3],
  ]);
  // Opens would make A the winner; clicks make C.
  for (const m of bySubject.get('Variant A')!) await fetch(pixelOf(String(m.parsed.html))!);
  const res = await fetch(linkOf(String(bySubject.get('Variant C')![0].parsed.html))!, { redirect: 'manual' });
  expect(res.headers.get('location')).toBe('https://shop.example/C');
  await whenStatus(key, c.id, 'SENT');
  await oneVariantEach(c.id, domain, N);
  expect(
    mailTo(domain)
      .slice(10)
      .map((m) => m.parsed.subject),
  ).toEqual(Array(30).fill('Variant C'));
  expect((await get(key, c.id)).abTest.winnerVariantId).toBe('C');
  const again = await svc.api.post(`/campaigns/${c.id}/winner`, { variantId: 'A' }, key);
  expect(again.status).toBe(409);
}, 240_000);

test('manual: TESTING until POST /winner, which a second call answers 409; an unknown variant is 422', async () => {
  const N = 20;
  const { key, domain, from } = await setup('AbManual', N);
  const c = await abCampaign(key, from, { variants: variants(2), testPercent: 10, waitMinutes: 10080, winnerCriteria: 'manual' });
  expect((await svc.api.post(`/campaigns/${c.id}/winner`, { variantId: 'A' }, key)).status).toBe(400);
  await svc.api.post(`/campaigns/${c.id}/send`, {}, key);
  await whenStatus(key, c.id, 'TESTING');
  expect(mailTo(domain)).toHaveLength(2);
  expect((await svc.api.post(`/campaigns/${c.id}/winner`, { variantId: 'C' }, key)).status).toBe(422);
  const chosen = await svc.api.post(`/campaigns/${c.id}/winner`, { variantId: 'A' }, key);
  expect(chosen.status).toBe(200);
  expect(chosen.body.data.abTest.winnerVariantId).toBe('A');
  const second = await svc.api.post(`/campaigns/${c.id}/winner`, { variantId: 'B' }, key);
  expect(second.status).toBe(409);
  expect(second.body).toMatchObject({ success: false, error: { code: 'WINNER_ALREADY_CHOSEN' } });
  await whenStatus(key, c.id, 'SENT');
  await oneVariantEach(c.id, domain, N);
  expect(
    mailTo(domain)
      .slice(2)
      .map((m) => m.parsed.subject),
  ).toEqual(Array(18).fill('Variant A'));
});

test('cancel during the wait sends nothing more', async () => {
  const N = 20;
  const { key, domain, from } = await setup('AbCancel', N);
  const c = await abCampaign(key, from, { variants: variants(2), testPercent: 20, waitMinutes: 1, winnerCriteria: 'opens' });
  await svc.api.post(`/campaigns/${c.id}/send`, {}, key);
  await whenStatus(key, c.id, 'TESTING');
  expect(mailTo(domain)).toHaveLength(4);
  const cancelled = await svc.api.post(`/campaigns/${c.id}/cancel`, {}, key);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.data.status).toBe('CANCELLED');
  await until(async () => ((await rows(c.id)).every((r) => r.status !== 'QUEUED') ? true : undefined));
  // Past the wait: the winner would have gone by now.
  await new Promise((r) => setTimeout(r, 65_000));
  expect(mailTo(domain)).toHaveLength(4);
  expect((await get(key, c.id)).status).toBe('CANCELLED');
  expect((await rows(c.id)).filter((r) => r.status === 'CANCELLED')).toHaveLength(16);
}, 120_000);

test('variants are templates too: Liquid checked when written, an MJML variant compiled and sent as HTML', async () => {
  const N = 10;
  const { key, domain, from } = await setup('AbMjml', N);
  const abTest = { testPercent: 50, waitMinutes: 10080, winnerCriteria: 'manual' };
  const broken = await svc.api.post(
    '/campaigns',
    { name: 'refused', subject: 's', body: 'b', from, audienceType: 'ALL', abTest: { ...abTest, variants: [{}, { body: '<p>{% if vip %}VIP</p>' }] } },
    key,
  );
  expect(broken.status).toBe(422);
  expect(broken.body.error.errors[0]).toMatchObject({ field: 'abTest.variants.1.body', code: 'invalid_template' });
  expect(broken.body.error.message).toMatch(/^abTest\.variants\.1\.body: .*line 1, column \d+/);
  const badMjml = await svc.api.post(
    '/campaigns',
    {
      name: 'refused',
      subject: 's',
      body: '<mjml><mj-body><mj-section><mj-column><mj-text>Plain</mj-text></mj-column></mj-section></mj-body></mjml>',
      format: 'mjml',
      from,
      audienceType: 'ALL',
      abTest: { ...abTest, variants: [{}, { body: '<mjml><mj-body><mj-text>outside a column</mj-text></mj-body></mjml>' }] },
    },
    key,
  );
  expect(badMjml.status).toBe(422);
  expect(badMjml.body.error.errors[0].field).toBe('abTest.variants.1.body');
  expect((await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM campaigns WHERE name = $1', ['refused']))[0].n).toBe(0);

  const mjml = (text: string) => `<mjml><mj-body><mj-section><mj-column><mj-text>${text}</mj-text></mj-column></mj-section></mj-body></mjml>`;
  const res = await svc.api.post(
    '/campaigns',
    {
      name: 'AB MJML',
      subject: 'Plain',
      body: mjml('Plain'),
      format: 'mjml',
      from,
      audienceType: 'ALL',
      abTest: { ...abTest, variants: [{ subject: 'Variant A' }, { subject: 'Variant B', body: mjml('Hello {{ email | upcase }}') }] },
    },
    key,
  );
  expect(res.status).toBe(201);
  // The answer shows each variant as written; the compiled HTML stays inside.
  expect(res.body.data.abTest.variants[1]).toEqual({ id: 'B', subject: 'Variant B', body: mjml('Hello {{ email | upcase }}') });
  await svc.api.post(`/campaigns/${res.body.data.id}/send`, {}, key);
  await whenStatus(key, res.body.data.id, 'TESTING');
  const sample = mailTo(domain);
  expect(sample).toHaveLength(5);
  for (const m of sample) {
    const html = String(m.parsed.html);
    expect(html).not.toContain('<mj-');
    expect(html).toContain('<table');
    if (m.parsed.subject === 'Variant B') expect(html).toContain(`Hello ${m.envelope.to[0].toUpperCase()}`);
    else expect(html).toContain('Plain');
  }
  expect(new Set(sample.map((m) => m.parsed.subject))).toEqual(new Set(['Variant A', 'Variant B']));
});
