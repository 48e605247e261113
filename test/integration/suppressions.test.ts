/**
 * The suppression list: what puts an address on it (a 5xx in the SMTP session, a complaint at the MX, a
 * manual entry), that every message to a listed or rule-matched address is recorded SUPPRESSED and never
 * sent while the call's other recipients go out, that a campaign leaves such addresses out, that only
 * DELETE lifts one, and the API around it (rules, check, import, export, tenancy, keys, bad input).
 */
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { parseInboundReport } from '../../src/inbound/bounce-report';
import { startCampaignSend } from '../../src/modules/campaigns/campaigns.service';
import { dbQuery } from '../setup/db';
import { publishReturnPath, verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

const CORPUS = path.join(__dirname, '../fixtures/bounces');

let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let mxPort: number;
/** Every RCPT TO the relay was asked, in order: what delivery attempted. */
const attempted: string[] = [];

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  mxPort = await freePort();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: relay.url,
    PUBLIC_URL: 'https://mail.postbox.test',
    INBOUND_SMTP_PORT: String(mxPort),
    SOFT_BOUNCE_LIMIT: '2',
  });
});
afterAll(async () => {
  await svc?.stop();
  await relay?.stop();
  await dns?.stop();
});

/** Refuses these addresses at RCPT TO with 550 5.1.1; records every address asked. */
function refuse(dead: string[]) {
  relay.rcptReply = (rcpt) => {
    attempted.push(rcpt);
    return dead.includes(rcpt) ? { code: 550, message: `5.1.1 <${rcpt}>: Recipient address rejected: User unknown in virtual mailbox table` } : 'accept';
  };
}
beforeEach(() => refuse([]));

interface Project {
  acct: Account;
  key: { key: string };
  domain: string;
  from: string;
}

let projects = 0;
async function project(opts: { returnPath?: boolean } = {}): Promise<Project> {
  const acct = await createAccount(svc.api);
  const domain = `p${++projects}-${Date.now()}.test`;
  const { id } = await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  if (opts.returnPath) await publishReturnPath(svc.api, dns, acct.project.secretKey, id);
  return { acct, key: { key: acct.project.secretKey }, domain, from: `Acme <hi@${domain}>` };
}

const send = (p: Project, to: string | string[], extra: Record<string, unknown> = {}) =>
  svc.api.post('/v1/send', { to, from: p.from, subject: 'Receipt', body: '<p>Thanks</p>', ...extra }, p.key);

const listed = async (p: Project, email: string) => (await svc.api.get(`/suppressions?email=${encodeURIComponent(email)}`, p.key)).body.data[0];
const emailStatus = async (id: string) => (await dbQuery<{ status: string }>(svc.databaseUrl, `SELECT status FROM emails WHERE id = $1`, [id]))[0]?.status;
const eventsOf = (emailId: string, name: string) =>
  dbQuery<{ data: Record<string, unknown> }>(svc.databaseUrl, `SELECT data FROM events WHERE name = $1 AND data->>'emailId' = $2`, [name, emailId]);
const receivedBy = (email: string) => relay.received.filter((r) => r.envelope.to.includes(email));

test('a 550 in the SMTP session lists the address; the next transactional send to it is never attempted while the other recipient is delivered', async () => {
  const p = await project();
  const dead = `gone@${p.domain}`;
  const alive = `here@${p.domain}`;
  refuse([dead]);
  const first = await send(p, dead);
  expect(first.body.data.emails[0].status).toBe('QUEUED');
  const firstId = first.body.data.emails[0].email;
  const entry = await until(() => listed(p, dead), 20_000, 'the address listed');
  expect(entry).toEqual({ email: dead, reason: 'BOUNCE', emailId: firstId, detail: expect.stringContaining('5.1.1'), createdAt: expect.any(String) });
  expect(await emailStatus(firstId)).toBe('BOUNCED');

  attempted.length = 0;
  // `subscribed: true` changes the subscription, never the suppression.
  const res = await send(p, [dead, alive], { subscribed: true });
  expect(res.status).toBe(200);
  const [toDead, toAlive] = res.body.data.emails;
  expect(toDead).toMatchObject({ contact: { email: dead }, status: 'SUPPRESSED' });
  expect(toAlive).toMatchObject({ contact: { email: alive }, status: 'QUEUED' });
  await until(async () => (receivedBy(alive).length ? true : undefined), 20_000, 'the other recipient delivered');
  expect(attempted).not.toContain(dead);
  expect(await emailStatus(toDead.email)).toBe('SUPPRESSED');
  expect((await eventsOf(toDead.email, 'email.suppressed'))[0].data).toMatchObject({ emailId: toDead.email, reason: 'BOUNCE' });
  expect((await svc.api.get(`/contacts/${toDead.contact.id}`, p.key)).body.subscribed).toBe(true);
  expect(await listed(p, dead)).toMatchObject({ reason: 'BOUNCE' });
});

test('the soft-bounce limit lists the address as BOUNCE, its detail saying so; one soft bounce does not', async () => {
  const p = await project();
  const full = `full@${p.domain}`;
  relay.rcptReply = (rcpt) => {
    attempted.push(rcpt);
    return rcpt === full ? { code: 552, message: `5.2.2 <${rcpt}>: Recipient address rejected: Mailbox full` } : 'accept';
  };
  const status = async (id: string) => until(async () => ((await emailStatus(id)) === 'BOUNCED' ? true : undefined), 20_000, 'the soft bounce');
  await status((await send(p, full)).body.data.emails[0].email);
  expect((await svc.api.post('/suppressions/check', { email: full }, p.key)).body.suppressed).toBe(false);
  const second = (await send(p, full)).body.data.emails[0].email;
  const entry = await until(() => listed(p, full), 20_000, 'the address listed');
  expect(entry).toMatchObject({
    reason: 'BOUNCE',
    emailId: second,
    detail: expect.stringMatching(/^soft-bounce limit reached: 2 soft bounces in a row.*5\.2\.2/),
  });
});

test('a double opt-in confirmation to a suppressed address is recorded SUPPRESSED, never sent', async () => {
  const p = await project();
  const address = `confirm@${p.domain}`;
  const topic = (await svc.api.post('/topics', { name: 'News', defaultSubscription: 'opt_out', doubleOptIn: true }, p.key)).body.id;
  await svc.api.post('/suppressions', { emails: [address] }, p.key);
  const contact = (await svc.api.post('/contacts', { email: address, subscribed: true }, p.key)).body;
  attempted.length = 0;
  const patched = await svc.api.patch(`/contacts/${contact.id}`, { topics: { [topic]: true } }, p.key);
  expect(patched.body.topics[topic]).toBe('pending');
  const [row] = await until(
    async () => {
      const rows = await dbQuery<{ id: string; status: string }>(svc.databaseUrl, `SELECT id, status FROM emails WHERE contact_id = $1`, [contact.id]);
      return rows.length ? rows : undefined;
    },
    20_000,
    'the confirmation mail recorded',
  );
  expect(row.status).toBe('SUPPRESSED');
  expect((await eventsOf(row.id, 'email.suppressed'))[0].data).toMatchObject({ reason: 'MANUAL' });
  expect(attempted).not.toContain(address);
});

test('mail queued before its address was listed is recorded SUPPRESSED when delivery claims it, never sent', async () => {
  const p = await project();
  const late = `late@${p.domain}`;
  // Queued the way automations and campaign tests queue mail, then listed before any drain claims it.
  const contact = (await svc.api.post('/contacts', { email: late, subscribed: true }, p.key)).body;
  const emailId = (
    await dbQuery<{ id: string }>(
      svc.databaseUrl,
      `INSERT INTO emails (id, project_id, contact_id, type, from_email, to_email, subject, html, message_id, next_attempt_at)
       VALUES (gen_random_uuid(), $1, $2, 'TRANSACTIONAL', $3, $4, 'Later', '<p>x</p>', '<x@' || $5 || '>', now() + interval '2 seconds') RETURNING id`,
      [p.acct.project.id, contact.id ?? contact.data?.id, `hi@${p.domain}`, late, p.domain],
    )
  )[0].id;
  expect((await svc.api.post('/suppressions', { emails: [late] }, p.key)).status).toBe(200);
  attempted.length = 0;
  await until(async () => ((await emailStatus(emailId)) === 'SUPPRESSED' ? true : undefined), 20_000, 'the claim suppressing it');
  expect(attempted).not.toContain(late);
  expect((await eventsOf(emailId, 'email.suppressed'))[0].data).toMatchObject({ reason: 'MANUAL' });
});

/** A real ARF report from the corpus, made to speak of our message's recipient. */
async function complaintFor(recipient: string): Promise<string> {
  let text = fs.readFileSync(path.join(CORPUS, 'arf-01.eml'), 'latin1');
  const parsed = await parseInboundReport(Buffer.from(text, 'latin1'));
  if (parsed.kind !== 'complaint' || !parsed.recipient) throw new Error('arf-01.eml is not a complaint');
  text = text.split(parsed.recipient).join(recipient);
  return text.replace(/^Message-ID:.*$/im, `Message-ID: <report-${Date.now()}@mta.test>`);
}

test('a complaint through the MX lists the address; re-subscribed, a campaign leaves it out, and skips one listed after the audience was fixed', async () => {
  const p = await project({ returnPath: true });
  const complainer = `angry@${p.domain}`;
  const sent = await send(p, complainer, { subscribed: true });
  const emailId = sent.body.data.emails[0].email;
  const received = await until(async () => receivedBy(complainer)[0], 20_000, 'the first mail');
  // Delivered to the return path as an MTA delivers a report: null sender.
  const { dialog } = await SmtpDialog.open(mxPort);
  try {
    for (const line of ['EHLO mta.test', 'MAIL FROM:<>', `RCPT TO:<${received.envelope.from}>`]) expect(await dialog.command(line)).toMatch(/^250/);
    expect(await dialog.data(await complaintFor(complainer))).toMatch(/^250/);
  } finally {
    dialog.close();
  }
  const entry = await until(() => listed(p, complainer), 10_000, 'the complaint listing the address');
  expect(entry).toMatchObject({ reason: 'COMPLAINT', emailId, detail: expect.stringContaining('abuse') });

  const contactId = sent.body.data.emails[0].contact.id;
  expect((await svc.api.patch(`/contacts/${contactId}`, { subscribed: true }, p.key)).status).toBe(200);
  expect((await svc.api.get(`/contacts/${contactId}`, p.key)).body.subscribed).toBe(true);
  for (const who of ['reader', 'later']) await svc.api.post('/contacts', { email: `${who}@${p.domain}`, subscribed: true }, p.key);

  const c = (await svc.api.post('/campaigns', { name: 'n', subject: 'News', body: '<p>n</p>', from: `hi@${p.domain}`, audienceType: 'ALL' }, p.key)).body.data;
  // The audience is fixed as the workflow's first step does; then `later` is listed; then delivery runs.
  await dbQuery(svc.databaseUrl, `UPDATE campaigns SET status = 'SCHEDULED' WHERE id = $1`, [c.id]);
  expect(await startCampaignSend(svc.orm.em.fork(), c.id)).toEqual({ proceed: true, recipients: 2 });
  await svc.api.post('/suppressions', { emails: [`later@${p.domain}`] }, p.key);
  attempted.length = 0;
  await svc.temporal.startCampaignWorkflow({ id: c.id, projectId: p.acct.project.id, scheduledFor: null });
  await until(async () => ((await svc.api.get(`/campaigns/${c.id}`, p.key)).body.status === 'SENT' ? true : undefined), 30_000, 'the campaign sent');
  expect(attempted.filter((a) => a.endsWith(`@${p.domain}`))).toEqual([`reader@${p.domain}`]);
  const rows = await dbQuery<{ to_email: string; status: string }>(
    svc.databaseUrl,
    `SELECT to_email, status FROM emails WHERE campaign_id = $1 ORDER BY to_email`,
    [c.id],
  );
  expect(rows).toEqual([
    { to_email: `later@${p.domain}`, status: 'SUPPRESSED' },
    { to_email: `reader@${p.domain}`, status: 'SENT' },
  ]);
  expect((await svc.api.get(`/campaigns/${c.id}/stats`, p.key)).body).toMatchObject({ totalRecipients: 2, sent: 1, suppressed: 1, queued: 0 });
});

test('manual entries: added in lower case with reason MANUAL, listed and filtered; DELETE lifts one, and a second DELETE is 404', async () => {
  const p = await project();
  const a = `Manual.One@${p.domain}`;
  const b = `two@${p.domain}`;
  const added = await svc.api.post('/suppressions', { emails: [a, b] }, p.key);
  expect(added.status).toBe(200);
  expect(added.body).toEqual({ added: [a.toLowerCase(), b], alreadyListed: [] });
  expect((await svc.api.post('/suppressions', { emails: [b] }, p.key)).body).toEqual({ added: [], alreadyListed: [b] });

  const list = await svc.api.get('/suppressions', p.key);
  expect(list.body).toMatchObject({ total: 2, page: 1, pageSize: 20, totalPages: 1 });
  expect(list.body.data.map((e: { email: string }) => e.email).sort()).toEqual([a.toLowerCase(), b].sort());
  expect(list.body.data[0]).toEqual({ email: expect.any(String), reason: 'MANUAL', detail: 'api', createdAt: expect.any(String) });
  expect((await svc.api.get('/suppressions?reason=BOUNCE', p.key)).body.total).toBe(0);
  expect((await svc.api.get('/suppressions?reason=MANUAL&pageSize=1', p.key)).body).toMatchObject({ total: 2, totalPages: 2 });
  expect((await svc.api.get(`/suppressions?email=${encodeURIComponent(a)}`, p.key)).body.data).toHaveLength(1);
  expect((await svc.api.post('/suppressions/check', { email: a }, p.key)).body).toEqual({ suppressed: true, reason: 'MANUAL' });

  const res = await send(p, b, { subscribed: true });
  expect(res.body.data.emails[0].status).toBe('SUPPRESSED');
  // Neither /v1/track nor /contacts with `subscribed: true` lifts it.
  expect((await svc.api.post('/v1/track', { email: b, event: 'visited', subscribed: true }, { key: p.acct.project.publicKey })).status).toBe(200);
  expect((await svc.api.post('/contacts', { email: b, subscribed: true }, p.key)).body.subscribed).toBe(true);
  expect((await svc.api.post('/suppressions/check', { email: b }, p.key)).body).toEqual({ suppressed: true, reason: 'MANUAL' });

  expect((await svc.api.delete(`/suppressions/${encodeURIComponent(b)}`, p.key)).body).toEqual({ email: b, deleted: true });
  expect((await svc.api.delete(`/suppressions/${encodeURIComponent(b)}`, p.key)).status).toBe(404);
  expect((await svc.api.post('/suppressions/check', { email: b }, p.key)).body).toEqual({ suppressed: false, reason: null });
  const again = await send(p, b);
  expect(again.body.data.emails[0].status).toBe('QUEUED');
  await until(async () => (receivedBy(b).length ? true : undefined), 20_000, 'mail to the lifted address');
});

test('rules: each kind matches what it says and nothing else; a disabled rule suppresses nothing; check names the rule', async () => {
  const p = await project();
  const rule = async (kind: string, pattern: string, enabled = true) => {
    const res = await svc.api.post('/suppressions/rules', { name: `${kind} ${pattern}`, kind, pattern, enabled }, p.key);
    expect(res.status).toBe(201);
    return res.body as { id: string; pattern: string; enabled: boolean };
  };
  const address = await rule('ADDRESS', 'Exact@Blocked.test');
  expect(address.pattern).toBe('exact@blocked.test');
  const domain = await rule('DOMAIN', 'spam.test');
  const prefix = await rule('PREFIX', 'noreply');
  const suffix = await rule('SUFFIX', '+test');
  const wildcard = await rule('WILDCARD', 'bot?_*@*.example');
  const disabled = await rule('DOMAIN', 'off.test', false);

  const check = async (email: string) => (await svc.api.post('/suppressions/check', { email }, p.key)).body;
  expect(await check('exact@blocked.test')).toEqual({ suppressed: true, reason: 'RULE', ruleId: address.id });
  expect(await check('other@blocked.test')).toEqual({ suppressed: false, reason: null });
  expect(await check('anyone@spam.test')).toEqual({ suppressed: true, reason: 'RULE', ruleId: domain.id });
  expect((await check('anyone@notspam.test')).suppressed).toBe(false);
  expect((await check('anyone@sub.spam.test')).suppressed).toBe(false);
  expect(await check('noreply-billing@x.test')).toEqual({ suppressed: true, reason: 'RULE', ruleId: prefix.id });
  expect((await check('hello.noreply@x.test')).suppressed).toBe(false);
  expect(await check('jane+test@x.test')).toEqual({ suppressed: true, reason: 'RULE', ruleId: suffix.id });
  expect((await check('jane+test.more@x.test')).suppressed).toBe(false);
  // `?` is one character, `*` any run; `_` is a literal character, not LIKE's wildcard.
  expect(await check('bot1_abc@mx.example')).toEqual({ suppressed: true, reason: 'RULE', ruleId: wildcard.id });
  expect((await check('bot1xabc@mx.example')).suppressed).toBe(false);
  expect((await check('bot12_abc@mx.example')).suppressed).toBe(false);
  expect((await check('someone@off.test')).suppressed).toBe(false);

  // A rule applies to sending too, and a disabled one does not until it is enabled.
  const res = await send(p, [`x@spam.test`, `someone@off.test`]);
  expect(res.body.data.emails.map((e: { status: string }) => e.status)).toEqual(['SUPPRESSED', 'QUEUED']);
  const [suppressed] = await eventsOf(res.body.data.emails[0].email, 'email.suppressed');
  expect(suppressed.data).toMatchObject({ reason: 'RULE', ruleId: domain.id });
  expect((await svc.api.patch(`/suppressions/rules/${disabled.id}`, { enabled: true }, p.key)).body.enabled).toBe(true);
  expect(await check('someone@off.test')).toEqual({ suppressed: true, reason: 'RULE', ruleId: disabled.id });
  // The list is asked before the rules.
  await svc.api.post('/suppressions', { emails: ['listed@spam.test'] }, p.key);
  expect(await check('listed@spam.test')).toEqual({ suppressed: true, reason: 'MANUAL' });
  // A send asks the same way: the list first, then the oldest matching rule.
  const both = await send(p, ['listed@spam.test', 'noreply+test@x.test']);
  expect(both.body.data.emails.map((e: { status: string }) => e.status)).toEqual(['SUPPRESSED', 'SUPPRESSED']);
  expect((await eventsOf(both.body.data.emails[0].email, 'email.suppressed'))[0].data).toMatchObject({ reason: 'MANUAL' });
  expect((await eventsOf(both.body.data.emails[1].email, 'email.suppressed'))[0].data).toMatchObject({ reason: 'RULE', ruleId: prefix.id });

  const rules = (await svc.api.get('/suppressions/rules', p.key)).body.data;
  expect(rules.map((r: { id: string }) => r.id)).toEqual([address.id, domain.id, prefix.id, suffix.id, wildcard.id, disabled.id]);
  expect((await svc.api.delete(`/suppressions/rules/${domain.id}`, p.key)).body).toEqual({ id: domain.id, deleted: true });
  expect((await check('anyone@spam.test')).suppressed).toBe(false);
  expect((await svc.api.get(`/suppressions/rules/${domain.id}`, p.key)).status).toBe(404);
});

test('rules: bad patterns are 422 naming the field, and a project has at most 100', async () => {
  const p = await project();
  const post = (kind: string, pattern: string) => svc.api.post('/suppressions/rules', { name: 'r', kind, pattern }, p.key);
  for (const [kind, pattern] of [
    ['WILDCARD', 'no-at-sign*'],
    ['WILDCARD', `${'*a'.repeat(11)}@x.test`],
    ['WILDCARD', `${'a'.repeat(100)}@x.test`],
    ['DOMAIN', 'a@b.test'],
    ['PREFIX', 'x@'],
    ['ADDRESS', 'not an address'],
    ['REGEX', '.*'],
  ]) {
    const res = await post(kind, pattern);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors[0].field).toBe(kind === 'REGEX' ? 'kind' : 'pattern');
  }
  const one = (await post('PREFIX', 'abc')).body;
  expect((await svc.api.patch(`/suppressions/rules/${one.id}`, { kind: 'WILDCARD' }, p.key)).status).toBe(422);
  for (let i = 1; i < 100; i++) expect((await post('PREFIX', `p${i}`)).status).toBe(201);
  const over = await post('PREFIX', 'one-too-many');
  expect(over.status).toBe(422);
  expect(over.body.error.errors[0].message).toMatch(/at most 100/);
});

async function upload(p: Project, csv: string | Buffer) {
  const form = new FormData();
  form.append('file', new Blob([csv], { type: 'text/csv' }), 'suppressions.csv');
  const res = await fetch(`${svc.api.baseUrl}/suppressions/import`, { method: 'POST', body: form, headers: { authorization: `Bearer ${p.key.key}` } });
  return { status: res.status, body: (await res.json()) as any };
}

test('import: valid rows are listed with reason MANUAL, invalid rows counted and reported by line, listed ones kept; export answers the CSV', async () => {
  const p = await project();
  await svc.api.post('/suppressions', { emails: [`kept@${p.domain}`] }, p.key);
  const csv = [
    '\uFEFFname,Email,source',
    `Ann,Ann@${p.domain},old`,
    'Bob,not-an-address,old',
    `Kim,kept@${p.domain},old`,
    'Short',
    `Lee,"lee@${p.domain}",x`,
    '',
  ].join('\n');
  const res = await upload(p, csv);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ status: 'COMPLETED', rows: 5, added: 2, alreadyListed: 1, invalid: 2 });
  expect(res.body.errors).toEqual([
    { line: 3, error: 'invalid email address: "not-an-address"' },
    { line: 5, error: expect.stringContaining('invalid email address') },
  ]);
  expect((await svc.api.get(`/suppressions/import/${res.body.jobId}`, p.key)).body).toEqual(res.body);
  expect((await svc.api.post('/suppressions/check', { email: `ann@${p.domain}` }, p.key)).body).toEqual({ suppressed: true, reason: 'MANUAL' });
  expect((await svc.api.post('/suppressions/check', { email: `lee@${p.domain}` }, p.key)).body.suppressed).toBe(true);

  const exported = await fetch(`${svc.api.baseUrl}/suppressions/export`, { headers: { authorization: `Bearer ${p.key.key}` } });
  expect(exported.status).toBe(200);
  expect(exported.headers.get('content-type')).toMatch(/^text\/csv/);
  const lines = (await exported.text()).trim().split('\n');
  expect(lines[0]).toBe('email,reason,createdAt');
  expect(lines.slice(1).map((l) => l.split(',').slice(0, 2).join(','))).toEqual([
    `ann@${p.domain},MANUAL`,
    `kept@${p.domain},MANUAL`,
    `lee@${p.domain},MANUAL`,
  ]);
  expect(lines.slice(1).every((l) => !Number.isNaN(Date.parse(l.split(',')[2])))).toBe(true);
  // What an export wrote, another project imports as it is.
  const q = await project();
  expect((await upload(q, lines.join('\n'))).body).toMatchObject({ status: 'COMPLETED', rows: 3, added: 3, invalid: 0 });
});

test('import: a file larger than one slice runs as a job; a file without a file field is 422', async () => {
  const p = await project();
  const rows = Array.from({ length: 12_000 }, (_, i) => `user-${String(i).padStart(6, '0')}@bulk-${p.domain},${'x'.repeat(10)}`);
  const res = await upload(p, ['email,note', ...rows, 'bad-row,x'].join('\n'));
  expect(res.status).toBe(202);
  expect(res.body.status).toBe('QUEUED');
  const done = await until(
    async () => {
      const job = (await svc.api.get(`/suppressions/import/${res.body.jobId}`, p.key)).body;
      return job.status === 'COMPLETED' || job.status === 'FAILED' ? job : undefined;
    },
    60_000,
    'the import job',
  );
  expect(done).toMatchObject({ status: 'COMPLETED', rows: 12_001, added: 12_000, invalid: 1, errors: [{ line: 12_002, error: expect.any(String) }] });
  expect((await svc.api.get('/suppressions?pageSize=1', p.key)).body.total).toBe(12_000);

  const form = new FormData();
  form.append('other', new Blob(['email\na@b.test']), 'x.csv');
  const missing = await fetch(`${svc.api.baseUrl}/suppressions/import`, { method: 'POST', body: form, headers: { authorization: `Bearer ${p.key.key}` } });
  expect(missing.status).toBe(422);
});

test('tenancy: one project’s list and rules never affect another’s', async () => {
  const a = await project();
  const b = await project();
  const shared = `shared@${b.domain}`;
  await svc.api.post('/suppressions', { emails: [shared] }, a.key);
  const ruleA = (await svc.api.post('/suppressions/rules', { name: 'r', kind: 'DOMAIN', pattern: b.domain }, a.key)).body;
  expect((await svc.api.post('/suppressions/check', { email: shared }, a.key)).body.suppressed).toBe(true);
  expect((await svc.api.post('/suppressions/check', { email: shared }, b.key)).body).toEqual({ suppressed: false, reason: null });
  expect((await svc.api.get('/suppressions', b.key)).body.total).toBe(0);
  expect((await svc.api.get('/suppressions/rules', b.key)).body.data).toEqual([]);
  expect((await svc.api.get(`/suppressions/rules/${ruleA.id}`, b.key)).status).toBe(404);
  expect((await svc.api.patch(`/suppressions/rules/${ruleA.id}`, { enabled: false }, b.key)).status).toBe(404);
  expect((await svc.api.delete(`/suppressions/rules/${ruleA.id}`, b.key)).status).toBe(404);
  expect((await svc.api.delete(`/suppressions/${encodeURIComponent(shared)}`, b.key)).status).toBe(404);
  expect((await send(b, shared)).body.data.emails[0].status).toBe('QUEUED');
  expect(await listed(a, shared)).toMatchObject({ reason: 'MANUAL' });
});

test('the public key is 401 on every suppression route; bad input is 422 in the documented shape', async () => {
  const p = await project();
  const pub = { key: p.acct.project.publicKey };
  const id = '00000000-0000-4000-8000-000000000000';
  for (const [method, url] of [
    ['GET', '/suppressions'],
    ['POST', '/suppressions'],
    ['DELETE', '/suppressions/a@b.test'],
    ['POST', '/suppressions/import'],
    ['GET', '/suppressions/export'],
    ['POST', '/suppressions/check'],
    ['GET', '/suppressions/rules'],
    ['POST', '/suppressions/rules'],
    ['PATCH', `/suppressions/rules/${id}`],
    ['DELETE', `/suppressions/rules/${id}`],
  ]) {
    expect([method, url, (await svc.api.request(method, url, { ...pub, body: method === 'GET' ? undefined : {} })).status]).toEqual([method, url, 401]);
  }
  const bad = async (res: Promise<{ status: number; body: any }>, field: string) => {
    const r = await res;
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ error: { code: 'VALIDATION_ERROR', errors: [expect.objectContaining({ field })] } });
  };
  await bad(svc.api.post('/suppressions', { emails: [] }, p.key), 'emails');
  await bad(svc.api.post('/suppressions', { emails: ['ok@x.test', 'not-an-address'] }, p.key), 'emails.1');
  await bad(svc.api.post('/suppressions', { emails: Array.from({ length: 1001 }, (_, i) => `u${i}@x.test`) }, p.key), 'emails');
  await bad(svc.api.post('/suppressions/check', { email: 'nope' }, p.key), 'email');
  await bad(svc.api.delete('/suppressions/not-an-address', p.key), 'email');
  await bad(svc.api.patch('/suppressions/rules/not-a-uuid', { enabled: true }, p.key), 'id');
  expect((await svc.api.get('/suppressions', p.key)).body.total).toBe(0);
});
