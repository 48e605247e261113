/**
 * Bounces and complaints from any relay: mail goes out with a per-message return path once the domain
 * publishes it, and what real MTAs send back to it (samples from sisimai's set-of-emails, sent with swaks
 * to the service's own MX) is recorded as SES's events are: hard bounces and complaints unsubscribe,
 * soft bounces, delays and auto-replies do not, and a 5xx during the SMTP session is a hard bounce (5.1.1) or, when it
 * speaks of the recipient's mailbox, a soft one.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { parseInboundReport } from '../../src/inbound/bounce-report';
import { dbQuery } from '../setup/db';
import { dkimStatus } from '../setup/dkim';
import { publishReturnPath, verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { type Received, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

const run = promisify(execFile);
const CORPUS = path.join(__dirname, '../fixtures/bounces');
const SOFT_BOUNCE_LIMIT = 3;

let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let acct: Account;
let key: { key: string };
let mxPort: number;
let domainId: string;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  mxPort = await freePort();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: relay.url,
    PUBLIC_URL: 'https://mail.postbox.test',
    INBOUND_SMTP_PORT: String(mxPort),
    SOFT_BOUNCE_LIMIT: String(SOFT_BOUNCE_LIMIT),
  });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  domainId = (await verifiedDomain(svc.api, dns, acct.project.secretKey, 'acme.test')).id;
});
afterAll(async () => {
  await svc?.stop();
  await relay?.stop();
  await dns?.stop();
});

/** Sends one email with /v1/send and answers its id, its contact and what the relay received. */
async function sendOne(to: string): Promise<{ emailId: string; contactId: string; received: Received }> {
  const res = await svc.api.post('/v1/send', { to, from: 'Acme <hi@acme.test>', subject: 'Hello', body: '<p>Hi</p>', subscribed: true }, key);
  expect(res.status).toBe(200);
  const emailId: string = res.body.data.emails[0].email;
  // Its Message-ID is <email id@domain>: the one message, whatever else went to the same address.
  const received = await until(async () => relay.received.find((r) => r.parsed.messageId?.includes(emailId)), 20_000, `${to} at the relay`);
  return { emailId, contactId: res.body.data.emails[0].contact.id, received };
}

/**
 * A real report from the corpus, made to speak of our message: its recipient and the original's
 * Message-ID replaced by ours (as the MTA would have written them), and a Message-ID of its own.
 */
async function reportFrom(file: string, opts: { recipient?: string; originalMessageId?: string; replace?: [string, string] }): Promise<string> {
  let text = fs.readFileSync(path.join(CORPUS, file), 'latin1');
  const parsed = await parseInboundReport(Buffer.from(text, 'latin1'));
  const theirs = parsed.kind === 'bounce' || parsed.kind === 'delay' ? parsed.recipients[0]?.recipient : parsed.kind === 'complaint' ? parsed.recipient : null;
  if (opts.recipient && theirs) text = text.replace(new RegExp(theirs.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'gi'), opts.recipient);
  const original = parsed.kind !== 'unknown' ? parsed.original.messageId : null;
  if (opts.originalMessageId && original) text = text.split(original).join(opts.originalMessageId);
  if (opts.replace) text = text.split(opts.replace[0]).join(opts.replace[1]);
  text = text.replace(/^Message-ID:.*$/im, `Message-ID: <report-${Math.random().toString(36).slice(2)}@mta.test>`);
  const file2 = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dsn-')), file);
  fs.writeFileSync(file2, text, 'latin1');
  return file2;
}

/** Delivers a message file to the service's MX with swaks, as an MTA delivers a report: null sender, to `rcpt`. */
async function deliverReport(file: string, rcpt: string): Promise<string> {
  const { stdout } = await run('swaks', [
    '--server',
    `127.0.0.1:${mxPort}`,
    '--from',
    '<>',
    '--to',
    rcpt,
    '--data',
    `@${file}`,
    '--helo',
    'mta.test',
    '--suppress-data',
  ]);
  return stdout;
}

const contact = async (id: string) => (await svc.api.get(`/contacts/${id}`, key)).body;
const emailRow = async (id: string) => (await dbQuery(svc.databaseUrl, `SELECT status FROM emails WHERE id = $1`, [id]))[0];
const eventsOf = async (emailId: string, name: string) =>
  dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE name = $1 AND data->>'emailId' = $2 ORDER BY created_at`, [name, emailId]);

test("a domain's return path is listed with its records; mail keeps the From address as envelope sender until both are published", async () => {
  const domain = (await svc.api.get(`/domains/${domainId}`, key)).body;
  expect(domain.returnPath).toEqual({ host: 'bounces.acme.test', verified: false });
  expect(domain.records.filter((r: { purpose: string }) => r.purpose.startsWith('return-path'))).toEqual([
    expect.objectContaining({ type: 'MX', name: 'bounces.acme.test', value: 'mail.postbox.test', priority: 10, required: false, purpose: 'return-path' }),
    expect.objectContaining({ type: 'TXT', name: 'bounces.acme.test', value: expect.stringMatching(/^v=spf1 /), required: false, purpose: 'return-path-spf' }),
  ]);
  const before = await sendOne('before@example.org');
  expect(before.received.envelope.from).toBe('hi@acme.test');

  await publishReturnPath(svc.api, dns, acct.project.secretKey, domainId);
  const after = await sendOne('after@example.org');
  // b<the email's id><64 bits of an HMAC>@bounces.<domain>
  expect(after.received.envelope.from).toMatch(new RegExp(`^b${after.emailId.replace(/-/g, '')}[0-9a-f]{16}@bounces\\.acme\\.test$`));
  // Everything else stays: the From: header, and the DKIM signature of the sender's domain.
  expect((after.received.parsed.from as any).value[0].address).toBe('hi@acme.test');
  expect((await dkimStatus(after.received.raw, dns, after.received.envelope.from!)).result).toBe('pass');
});

test('a hard bounce from a real MTA to the return path unsubscribes the contact within seconds; the same report again changes nothing', async () => {
  const sent = await sendOne('gone@example.org');
  const dsn = await reportFrom('lhost-postfix-04.eml', { recipient: 'gone@example.org' });
  expect(await deliverReport(dsn, sent.received.envelope.from!)).toMatch(/<- {2}250 2\.0\.0 OK/);
  await until(async () => ((await contact(sent.contactId)).subscribed === false ? true : undefined), 10_000, 'the contact unsubscribed');
  expect((await emailRow(sent.emailId)).status).toBe('BOUNCED');
  const [bounce] = await eventsOf(sent.emailId, 'email.bounce');
  expect(bounce.data).toMatchObject({ bounceType: 'Permanent', bounceSubType: 'NoEmail', reason: 'userunknown', status: '5.1.1', source: 'inbound' });
  // The activity feed shows it, as it shows SES's.
  const feed = (await svc.api.get(`/activity?limit=50`, key)).body;
  expect(JSON.stringify(feed)).toContain('email.bounce');

  await deliverReport(dsn, sent.received.envelope.from!);
  // Another MTA's report of the same email: the email is BOUNCED already, so it records nothing more.
  await deliverReport(await reportFrom('lhost-exim-05.eml', { recipient: 'gone@example.org' }), sent.received.envelope.from!);
  expect(await eventsOf(sent.emailId, 'email.bounce')).toHaveLength(1);
  const [inbound] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM inbound_reports WHERE email_id = $1`, [sent.emailId]);
  expect(inbound.n).toBe(2);
});

test("a campaign email bounced over SMTP counts in the campaign's bouncedCount", async () => {
  const email = `campaign-bounce-${Date.now()}@example.org`;
  const c = (await svc.api.post('/contacts', { email, subscribed: true }, key)).body;
  const audienceCondition = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'equals', value: email }] }] };
  const created = await svc.api.post(
    '/campaigns',
    { name: 'B', subject: 'News', body: '<p>News</p>', from: 'hi@acme.test', audienceType: 'FILTERED', audienceCondition },
    key,
  );
  expect(created.status).toBe(201);
  const campaign = created.body.data;
  expect((await svc.api.post(`/campaigns/${campaign.id}/send`, {}, key)).status).toBeLessThan(300);
  const received = await until(async () => relay.received.find((r) => r.envelope.to.includes(email)), 30_000, 'the campaign email');
  const dsn = await reportFrom('lhost-exim-05.eml', { recipient: email });
  await deliverReport(dsn, received.envelope.from!);
  await until(async () => ((await svc.api.get(`/campaigns/${campaign.id}`, key)).body.bouncedCount === 1 ? true : undefined), 10_000, 'bouncedCount 1');
  expect((await contact(c.id)).subscribed).toBe(false);
});

test('soft bounces, delay notices and auto-replies unsubscribe no one; SOFT_BOUNCE_LIMIT soft bounces of separate emails in a row do', async () => {
  const to = `full-${Date.now()}@example.org`;
  const first = await sendOne(to);
  await deliverReport(await reportFrom('lhost-qmail-08.eml', { recipient: to }), first.received.envelope.from!); // mailbox full (552, soft)
  await deliverReport(await reportFrom('rfc3464-07.eml', { recipient: to }), first.received.envelope.from!); // "will keep trying"
  await deliverReport(await reportFrom('rfc3834-01.eml', {}), first.received.envelope.from!); // vacation
  await until(async () => ((await eventsOf(first.emailId, 'email.received')).length === 2 ? true : undefined), 10_000, 'the delay and the auto-reply');
  const [soft] = await eventsOf(first.emailId, 'email.bounce');
  expect(soft.data).toMatchObject({ bounceType: 'Transient', bounceSubType: 'MailboxFull' });
  expect((await eventsOf(first.emailId, 'email.received')).map((e) => e.data.type).sort()).toEqual(['auto-reply', 'delay']);
  expect((await emailRow(first.emailId)).status).not.toBe('BOUNCED');
  expect((await contact(first.contactId)).subscribed).toBe(true);

  // The limit is reached on the third email soft-bouncing with nothing delivered or opened between.
  for (let i = 1; i < SOFT_BOUNCE_LIMIT; i++) {
    const next = await sendOne(to);
    await deliverReport(await reportFrom('lhost-qmail-06.eml', { recipient: to }), next.received.envelope.from!);
    await until(async () => ((await eventsOf(next.emailId, 'email.bounce')).length ? true : undefined), 10_000, 'the soft bounce');
    expect((await contact(first.contactId)).subscribed).toBe(i < SOFT_BOUNCE_LIMIT - 1);
  }
  const [unsubscribed] = await dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE name = 'contact.unsubscribed' AND contact_id = $1`, [first.contactId]);
  expect(unsubscribed.data).toMatchObject({ reason: 'soft-bounce' });
});

test('complaints unsubscribe: an ARF report at the return path, and one at the feedback-loop address found by the original Message-ID', async () => {
  const a = await sendOne(`complains-${Date.now()}@example.org`);
  await deliverReport(await reportFrom('arf-01.eml', { recipient: a.received.envelope.to[0] }), a.received.envelope.from!);
  await until(async () => ((await contact(a.contactId)).subscribed === false ? true : undefined), 10_000, 'unsubscribed by the complaint');
  expect((await eventsOf(a.emailId, 'email.complaint'))[0].data).toMatchObject({ complaintFeedbackType: 'abuse', source: 'inbound' });
  expect((await emailRow(a.emailId)).status).toBe('COMPLAINED');

  const b = await sendOne(`fbl-${Date.now()}@example.org`);
  const messageId = (await dbQuery(svc.databaseUrl, `SELECT message_id FROM emails WHERE id = $1`, [b.emailId]))[0].message_id;
  await deliverReport(await reportFrom('arf-02.eml', { recipient: b.received.envelope.to[0], originalMessageId: messageId }), 'fbl@bounces.acme.test');
  await until(async () => ((await contact(b.contactId)).subscribed === false ? true : undefined), 10_000, 'unsubscribed by the feedback loop');
});

test("a complaint at a feedback-loop address is matched only to mail sent from that address's domain; another's is kept unmatched", async () => {
  const sent = await sendOne(`fbl-domain-${Date.now()}@example.org`);
  const rcpt = sent.received.envelope.to[0];
  const messageId = (await dbQuery(svc.databaseUrl, `SELECT message_id FROM emails WHERE id = $1`, [sent.emailId]))[0].message_id;
  const reportsTo = async (address: string) =>
    dbQuery(svc.databaseUrl, `SELECT email_id FROM inbound_reports WHERE envelope_to = $1 AND kind = 'complaint'`, [address]);

  // Found by its Message-ID, and by its return path in the returned original: both at another project's domain's address.
  const other = await createAccount(svc.api, 'Other sender');
  await verifiedDomain(svc.api, dns, other.project.secretKey, 'other.test');
  const byMessageId = await reportFrom('arf-02.eml', { recipient: rcpt, originalMessageId: messageId });
  const byReturnPath = await reportFrom('arf-02.eml', { recipient: rcpt, replace: ['shironeko@example.com', sent.received.envelope.from!] });
  for (const file of [byMessageId, byReturnPath]) expect(await deliverReport(file, 'fbl@bounces.other.test')).toMatch(/<- {2}250 /);
  await until(async () => ((await reportsTo('fbl@bounces.other.test')).length === 2 ? true : undefined), 10_000, 'both kept');
  expect(await reportsTo('fbl@bounces.other.test')).toEqual([{ email_id: null }, { email_id: null }]);
  expect(await eventsOf(sent.emailId, 'email.complaint')).toHaveLength(0);
  expect((await contact(sent.contactId)).subscribed).toBe(true);

  // The same report at the sender domain's own address is the email's.
  await deliverReport(byReturnPath, 'fbl@bounces.acme.test');
  await until(async () => ((await contact(sent.contactId)).subscribed === false ? true : undefined), 10_000, 'unsubscribed by the feedback loop');
});

test('the feedback-loop address exists only for verified domains, and one report stores a bounded record', async () => {
  const { dialog } = await SmtpDialog.open(mxPort);
  await dialog.command('EHLO mta.test');
  await dialog.command('MAIL FROM:<>');
  expect(await dialog.command('RCPT TO:<fbl@bounces.nobody.test>')).toMatch(/^550 5\.1\.1 /);
  expect(await dialog.command('RCPT TO:<fbl@bounces.acme.test>')).toMatch(/^250 /);
  dialog.close();

  // A DSN naming 500 recipients, each with a long diagnostic: what is kept of it stays small.
  const sent = await sendOne(`many-${Date.now()}@example.org`);
  const recipients = Array.from({ length: 500 }, (_, i) =>
    [`Final-Recipient: rfc822; r${i}@example.org`, 'Action: failed', 'Status: 5.1.1', `Diagnostic-Code: smtp; 550 ${'unknown user '.repeat(40)}`].join('\n'),
  );
  const dsn = [
    'From: MAILER-DAEMON@mta.test',
    `Message-ID: <many-${Date.now()}@mta.test>`,
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="b"',
    '',
    '--b',
    'Content-Type: text/plain',
    '',
    'Delivery failed.',
    '--b',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mta.test',
    '',
    recipients.join('\n\n'),
    '',
    '--b--',
    '',
  ].join('\n');
  const { dialog: d2 } = await SmtpDialog.open(mxPort);
  await d2.command('EHLO mta.test');
  await d2.command('MAIL FROM:<>');
  await d2.command(`RCPT TO:<${sent.received.envelope.from}>`);
  expect(await d2.data(dsn)).toMatch(/^250 /);
  d2.close();
  const [row] = await dbQuery(svc.databaseUrl, `SELECT length(detail::text) AS n, detail FROM inbound_reports WHERE email_id = $1`, [sent.emailId]);
  expect(row.n).toBeLessThanOrEqual(16 * 1024);
  expect(row.detail).toMatchObject({ kind: 'bounce', recipientsOmitted: expect.any(Number) });
  expect(row.detail.recipients).toHaveLength(10);
});

test('the MX takes mail only for its own addresses: 550 5.1.1 for any other, a forged or an altered return path', async () => {
  const sent = await sendOne(`mx-${Date.now()}@example.org`);
  const real = sent.received.envelope.from!;
  const altered = real.replace(/^b(.)/, (_m, c: string) => `b${c === 'a' ? 'b' : 'a'}`);
  const { dialog } = await SmtpDialog.open(mxPort);
  await dialog.command('EHLO mta.test');
  expect(await dialog.command('MAIL FROM:<>')).toMatch(/^250 /);
  for (const rcpt of ['ceo@acme.test', 'postmaster@bounces.acme.test', `b${'0'.repeat(48)}@bounces.acme.test`, altered, real.replace('bounces.', 'other.')]) {
    expect(await dialog.command(`RCPT TO:<${rcpt}>`)).toMatch(/^550 5\.1\.1 /);
  }
  expect(await dialog.command(`RCPT TO:<${real.toUpperCase()}>`)).toMatch(/^250 /);
  expect(await dialog.command('AUTH PLAIN AGFiAGM=')).toMatch(/^5\d\d /);
  dialog.close();
});

test('malformed mail to a return path is taken and kept as "other", and never takes the MX down', async () => {
  const sent = await sendOne(`junk-${Date.now()}@example.org`);
  const { dialog } = await SmtpDialog.open(mxPort);
  await dialog.command('EHLO mta.test');
  await dialog.command('MAIL FROM:<>');
  expect(await dialog.command(`RCPT TO:<${sent.received.envelope.from}>`)).toMatch(/^250 /);
  const nested = `${'Content-Type: multipart/mixed; boundary=x\n\n--x\n'.repeat(3000)}`;
  expect(await dialog.data(`Subject: ???\nContent-Type: multipart/report; report-type=delivery-status; boundary=x\n\n${nested}\0\n`)).toMatch(/^250 /);
  dialog.close();
  await until(async () => ((await eventsOf(sent.emailId, 'email.received')).length ? true : undefined), 10_000, 'kept');
  expect((await eventsOf(sent.emailId, 'email.received'))[0].data.type).toBe('other');
  expect((await contact(sent.contactId)).subscribed).toBe(true);
});

test('a 5.1.1 refusal while sending is a hard bounce: BOUNCED and unsubscribed, not a plain FAILED; other 5xx stay FAILED', async () => {
  relay.reply = (rcpt) =>
    rcpt.includes('nouser@example.org')
      ? { code: 550, message: '5.1.1 <nouser@example.org>: Recipient address rejected: User unknown in virtual mailbox table' }
      : rcpt.includes('spam@example.org')
        ? { code: 554, message: '5.7.1 Message rejected as spam' }
        : 'accept';
  try {
    const hard = await svc.api.post('/v1/send', { to: 'nouser@example.org', from: 'hi@acme.test', subject: 'Hi', body: 'x', subscribed: true }, key);
    const soft = await svc.api.post('/v1/send', { to: 'spam@example.org', from: 'hi@acme.test', subject: 'Hi', body: 'x', subscribed: true }, key);
    const hardId = hard.body.data.emails[0].email;
    await until(async () => ((await emailRow(hardId)).status === 'BOUNCED' ? true : undefined), 20_000, 'BOUNCED');
    expect((await contact(hard.body.data.emails[0].contact.id)).subscribed).toBe(false);
    expect((await eventsOf(hardId, 'email.bounce'))[0].data).toMatchObject({ bounceType: 'Permanent', status: '5.1.1', source: 'smtp' });
    const softId = soft.body.data.emails[0].email;
    await until(async () => ((await emailRow(softId)).status === 'FAILED' ? true : undefined), 20_000, 'FAILED');
    expect((await contact(soft.body.data.emails[0].contact.id)).subscribed).toBe(true);
  } finally {
    relay.reply = () => 'accept';
  }
});

test("a 5xx about the recipient's mailbox while sending is a soft bounce until SOFT_BOUNCE_LIMIT; a relay's own refusal stays FAILED", async () => {
  const full = `full-rcpt-${Date.now()}@example.org`;
  const denied = `denied-rcpt-${Date.now()}@example.org`;
  relay.rcptReply = (rcpt) =>
    rcpt === full
      ? { code: 552, message: '5.2.2 <' + rcpt + '>: Recipient address rejected: Mailbox full' }
      : rcpt === denied
        ? { code: 550, message: '5.7.1 <' + rcpt + '>: Relay access denied' }
        : 'accept';
  const send = async (to: string) =>
    (await svc.api.post('/v1/send', { to, from: 'hi@acme.test', subject: 'Hi', body: 'x', subscribed: true }, key)).body.data.emails[0];
  try {
    const first = await send(full);
    await until(async () => ((await eventsOf(first.email, 'email.bounce')).length ? true : undefined), 20_000, 'the soft bounce');
    expect((await eventsOf(first.email, 'email.bounce'))[0].data).toMatchObject({
      bounceType: 'Transient',
      bounceSubType: 'MailboxFull',
      reason: 'mailboxfull',
      status: '5.2.2',
      diagnosticCode: expect.stringContaining('Mailbox full'),
      source: 'smtp',
    });
    // It never left, so it is not queued again: BOUNCED, as a hard refusal is.
    expect((await emailRow(first.email)).status).toBe('BOUNCED');
    expect((await contact(first.contact.id)).subscribed).toBe(true);

    // The limit is reached on the third refusal with nothing delivered or opened between.
    for (let i = 1; i < SOFT_BOUNCE_LIMIT; i++) {
      const next = await send(full);
      await until(async () => ((await eventsOf(next.email, 'email.bounce')).length ? true : undefined), 20_000, 'the soft bounce');
      expect((await contact(first.contact.id)).subscribed).toBe(i < SOFT_BOUNCE_LIMIT - 1);
    }

    const relaying = await send(denied);
    await until(async () => ((await emailRow(relaying.email)).status === 'FAILED' ? true : undefined), 20_000, 'FAILED');
    expect(await eventsOf(relaying.email, 'email.bounce')).toHaveLength(0);
    expect((await contact(relaying.contact.id)).subscribed).toBe(true);
  } finally {
    relay.rcptReply = () => 'accept';
  }
});

test("a campaign email refused with a full mailbox counts in the campaign's bouncedCount, and the contact stays subscribed", async () => {
  const email = `campaign-full-${Date.now()}@example.org`;
  relay.rcptReply = (rcpt) => (rcpt === email ? { code: 552, message: '5.2.2 Mailbox full' } : 'accept');
  try {
    const c = (await svc.api.post('/contacts', { email, subscribed: true }, key)).body;
    const audienceCondition = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'equals', value: email }] }] };
    const campaign = (
      await svc.api.post(
        '/campaigns',
        { name: 'F', subject: 'News', body: '<p>News</p>', from: 'hi@acme.test', audienceType: 'FILTERED', audienceCondition },
        key,
      )
    ).body.data;
    expect((await svc.api.post(`/campaigns/${campaign.id}/send`, {}, key)).status).toBeLessThan(300);
    await until(async () => ((await svc.api.get(`/campaigns/${campaign.id}`, key)).body.bouncedCount === 1 ? true : undefined), 30_000, 'bouncedCount 1');
    expect((await contact(c.id)).subscribed).toBe(true);
  } finally {
    relay.rcptReply = () => 'accept';
  }
});

test('a relay refusing our envelope sender, however it words it, bounces no one: FAILED, and the contact stays subscribed', async () => {
  // Postfix's reject_unlisted_sender on a relay that thinks the sender's domain is its own.
  relay.mailFromReply = (from) => ({ code: 550, message: `5.1.0 <${from}>: Sender address rejected: User unknown in local recipient table` });
  try {
    const res = await svc.api.post('/v1/send', { to: 'reader@example.org', from: 'hi@acme.test', subject: 'Hi', body: 'x', subscribed: true }, key);
    const emailId = res.body.data.emails[0].email;
    await until(async () => ((await emailRow(emailId)).status === 'FAILED' ? true : undefined), 20_000, 'FAILED');
    expect(await eventsOf(emailId, 'email.bounce')).toHaveLength(0);
    expect((await contact(res.body.data.emails[0].contact.id)).subscribed).toBe(true);
  } finally {
    relay.mailFromReply = () => 'accept';
  }
});

test('dev defaults: a bounce to the envelope sender unsubscribes in seconds and counts for its campaign; soft ones, delays, auto-replies do not', async () => {
  const port = await freePort();
  // A project judged from its first email: one bounce in the emails sent is over any threshold.
  const dev = await startTestService({
    DNS_SERVERS: dns.address,
    PUBLIC_URL: 'https://dev.postbox.test',
    INBOUND_SMTP_PORT: String(port),
    SECURITY_MIN_SENT: '1',
  });
  try {
    const owner = await createAccount(dev.api, 'Dev');
    const k = { key: owner.project.secretKey };
    const domain = await verifiedDomain(dev.api, dns, owner.project.secretKey, 'dev-sender.test');
    await publishReturnPath(dev.api, dns, owner.project.secretKey, domain.id);
    /** The envelope sender of the message the dev mailbox captured for `to`. */
    const envelopeSenderOf = async (to: string): Promise<string> =>
      (await until(async () => (await dev.api.get(`/dev/mailbox?to=${encodeURIComponent(to)}`)).body.data?.[0], 20_000, `the message to ${to}`)).envelope.from;
    const bounce = async (file: string, to: string, rcpt: string) =>
      run('swaks', [
        '--server',
        `127.0.0.1:${port}`,
        '--from',
        '<>',
        '--to',
        rcpt,
        '--data',
        `@${await reportFrom(file, { recipient: to })}`,
        '--helo',
        'mta.test',
      ]);
    // (Read from the database: after the first hard bounce the project is suspended and its keys answer 403.)
    const subscribed = async (contactId: string) =>
      (await dbQuery(dev.databaseUrl, `SELECT subscribed FROM contacts WHERE id = $1`, [contactId]))[0].subscribed;

    const sent = await dev.api.post('/v1/send', { to: 'reader@example.org', from: 'hi@dev-sender.test', subject: 'Hi', body: 'x', subscribed: true }, k);
    const contactId = sent.body.data.emails[0].contact.id;
    const envelopeFrom = await envelopeSenderOf('reader@example.org');
    expect(envelopeFrom).toMatch(/@bounces\.dev-sender\.test$/);

    // A mailbox full, a delay warning and a vacation reply: recorded, and the contact stays subscribed.
    await bounce('lhost-qmail-08.eml', 'reader@example.org', envelopeFrom);
    await bounce('rfc3464-07.eml', 'reader@example.org', envelopeFrom);
    await bounce('rfc3834-01.eml', 'reader@example.org', envelopeFrom);
    const received = async () =>
      dbQuery(dev.databaseUrl, `SELECT data->>'type' AS type FROM events WHERE name = 'email.received' AND contact_id = $1`, [contactId]);
    await until(async () => ((await received()).length === 2 ? true : undefined), 10_000, 'the delay and the auto-reply');
    expect((await received()).map((e) => e.type).sort()).toEqual(['auto-reply', 'delay']);
    expect(await subscribed(contactId)).toBe(true);

    // A campaign email hard-bounced: its contact unsubscribed and the campaign's bouncedCount 1.
    const reader2 = (await dev.api.post('/contacts', { email: 'reader2@example.org', subscribed: true }, k)).body;
    const audienceCondition = { logic: 'AND', groups: [{ filters: [{ field: 'email', operator: 'equals', value: 'reader2@example.org' }] }] };
    const campaign = (
      await dev.api.post(
        '/campaigns',
        { name: 'B', subject: 'News', body: '<p>News</p>', from: 'hi@dev-sender.test', audienceType: 'FILTERED', audienceCondition },
        k,
      )
    ).body.data;
    expect((await dev.api.post(`/campaigns/${campaign.id}/send`, {}, k)).status).toBeLessThan(300);
    await bounce('lhost-exim-05.eml', 'reader2@example.org', await envelopeSenderOf('reader2@example.org'));
    await until(async () => ((await subscribed(reader2.id)) === false ? true : undefined), 10_000, 'the campaign contact unsubscribed');
    const [counted] = await dbQuery(dev.databaseUrl, `SELECT bounced_count FROM campaigns WHERE id = $1`, [campaign.id]);
    expect(counted.bounced_count).toBe(1);

    // The /v1/send message hard-bounced: unsubscribed within seconds.
    await bounce('lhost-qmail-01.eml', 'reader@example.org', envelopeFrom);
    await until(async () => ((await subscribed(contactId)) === false ? true : undefined), 10_000, 'unsubscribed');
    // Sending security sees the bounces as it sees SES's: the project is suspended for its rate.
    const security = (await dev.api.get(`/projects/${owner.project.id}/security`, { cookie: owner.cookie })).body;
    expect(security).toMatchObject({ status: 'suspended', bounced: 2, sent: 2 });
  } finally {
    await dev.stop();
  }
});
