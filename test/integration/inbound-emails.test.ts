/**
 * Received mail, end to end through the real MX: a verified sender domain receives at inbound.<domain>; a reply is
 * stored, linked to the email it answers, recorded as `email.received` on the sender's contact, delivered to a
 * webhook endpoint and starts an automation; a stranger becomes an unsubscribed contact; another project sees
 * nothing; the MX relays nothing, caps the size, and keeps auto-replies out of the received mail.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

/** A webhook receiver on loopback that records every request. */
class Receiver {
  readonly received: Array<{ body: string; headers: Record<string, string> }> = [];
  private server?: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        this.received.push({ body: Buffer.concat(chunks).toString(), headers: req.headers as Record<string, string> });
        res.end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/hook`;
  }

  async stop(): Promise<void> {
    this.server!.closeAllConnections();
    await new Promise((resolve) => this.server!.close(resolve));
  }
}

const MAX_KB = 64;

let dns: ZoneDnsServer;
let relay: SmtpSink;
let receiver: Receiver;
let svc: TestService;
let acct: Account;
let key: { key: string };
let mxPort: number;
let domainId: string;
let hookSecret: string;
let automationId: string;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  receiver = await new Receiver().start();
  mxPort = await freePort();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: relay.url,
    PUBLIC_URL: 'https://mail.postbox.test',
    INBOUND_SMTP_PORT: String(mxPort),
    INBOUND_EMAIL_MAX_MB: String(MAX_KB / 1024),
    WEBHOOK_ALLOW_PRIVATE: 'true',
    DISPATCH_IDLE_SECONDS: '1',
  });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  domainId = (await verifiedDomain(svc.api, dns, acct.project.secretKey, 'acme.test')).id;
  const hook = await svc.api.post('/webhook-endpoints', { url: receiver.url(), events: ['email.received'] }, key);
  expect(hook.status).toBe(201);
  hookSecret = hook.body.secret;
  const w = (await svc.api.post('/workflows', { name: 'Replied', eventName: 'email.received' }, key)).body;
  const step = await svc.api.post(`/workflows/${w.id}/steps`, { type: 'UPDATE_CONTACT', name: 'mark', config: { updates: { replied: true } } }, key);
  await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: w.steps[0].id, toStepId: step.body.id }, key);
  expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key)).status).toBe(200);
  automationId = w.id;
});
afterAll(async () => {
  await svc?.stop();
  await receiver?.stop();
  await relay?.stop();
  await dns?.stop();
});

/** One SMTP transaction with the MX: each reply as the MX gave it. */
async function deliver(from: string, rcpts: string[], raw: string): Promise<{ rcpt: string[]; data?: string }> {
  const { dialog } = await SmtpDialog.open(mxPort);
  try {
    expect(await dialog.command('EHLO mta.example.org')).toMatch(/^250/);
    expect(await dialog.command(`MAIL FROM:<${from}>`)).toMatch(/^250 /);
    const rcpt: string[] = [];
    for (const r of rcpts) rcpt.push(await dialog.command(`RCPT TO:<${r}>`));
    if (!rcpt.some((r) => r.startsWith('250'))) return { rcpt };
    return { rcpt, data: await dialog.dataBytes(raw) };
  } finally {
    dialog.close();
  }
}

let seq = 0;
const message = (headers: Record<string, string>, body: string) =>
  [
    ...Object.entries({ 'Message-ID': `<m${++seq}-${Date.now()}@mail.example.org>`, Date: new Date().toUTCString(), ...headers }).map(([k, v]) => `${k}: ${v}`),
    '',
    body,
  ].join('\r\n');

const list = async (k = key) => (await svc.api.get('/inbound-emails', k)).body;
const receivedEvents = async () =>
  dbQuery<{ contact_id: string; data: Record<string, unknown> }>(
    svc.databaseUrl,
    `SELECT contact_id, data FROM events WHERE name = 'email.received' AND project_id = $1 AND data ? 'inboundEmailId' ORDER BY created_at`,
    [acct.project.id],
  );

test('a domain lists its inbound MX record next to the return path, never required', async () => {
  const domain = (await svc.api.get(`/domains/${domainId}`, key)).body;
  expect(domain.status).toBe('verified');
  expect(domain.records.filter((r: { purpose: string }) => ['return-path', 'inbound'].includes(r.purpose))).toEqual([
    expect.objectContaining({ type: 'MX', name: 'bounces.acme.test', value: 'mail.postbox.test', priority: 10, required: false, purpose: 'return-path' }),
    expect.objectContaining({ type: 'MX', name: 'inbound.acme.test', value: 'mail.postbox.test', priority: 10, required: false, purpose: 'inbound' }),
  ]);
});

test('a reply is stored, linked to the email it answers, recorded on the contact, delivered to a webhook and starts an automation', async () => {
  const sent = await svc.api.post(
    '/v1/send',
    { to: 'ann@example.org', from: 'Acme <hi@acme.test>', subject: 'Your receipt', body: '<p>Thanks</p>', subscribed: true },
    key,
  );
  expect(sent.status).toBe(200);
  const emailId: string = sent.body.data.emails[0].email;
  const contactId: string = sent.body.data.emails[0].contact.id;
  const out = await until(async () => relay.received.find((r) => r.parsed.messageId?.includes(emailId)), 20_000, 'the email at the relay');
  const messageId = out.parsed.messageId!;

  const raw = message(
    {
      From: 'Ann <Ann@Example.org>',
      To: 'Acme Support <support@inbound.acme.test>',
      Cc: 'bob@example.org',
      Subject: 'Re: Your receipt',
      'In-Reply-To': messageId,
      References: `<older@elsewhere.example> ${messageId}`,
      'MIME-Version': '1.0',
      'Content-Type': 'multipart/mixed; boundary="b1"',
    },
    [
      '--b1',
      'Content-Type: text/plain; charset=utf-8',
      '',
      'Thank you!\u0000 It arrived.',
      '--b1',
      'Content-Type: application/pdf; name="order.pdf"',
      'Content-Disposition: attachment; filename="order.pdf"',
      'Content-Transfer-Encoding: base64',
      '',
      Buffer.from('%PDF-1.4 a tiny pdf').toString('base64'),
      '--b1--',
      '',
    ].join('\r\n'),
  );
  const reply = await deliver('ann@example.org', ['support@inbound.acme.test'], raw);
  expect(reply.rcpt).toEqual([expect.stringMatching(/^250 /)]);
  expect(reply.data).toMatch(/^250 /);

  const page = await list();
  expect(page).toMatchObject({ total: 1, page: 1, pageSize: 20, totalPages: 1 });
  const id: string = page.data[0].id;
  const got = await svc.api.get(`/inbound-emails/${id}`, key);
  expect(got.status).toBe(200);
  expect(got.body).toEqual({
    id,
    from: 'ann@example.org',
    to: ['support@inbound.acme.test'],
    cc: ['bob@example.org'],
    subject: 'Re: Your receipt',
    // The NUL is gone: PostgreSQL could not have stored it.
    text: 'Thank you! It arrived.',
    html: null,
    headers: expect.arrayContaining([
      { name: 'Subject', value: 'Re: Your receipt' },
      { name: 'In-Reply-To', value: messageId },
    ]),
    attachments: [{ filename: 'order.pdf', contentType: 'application/pdf', size: '%PDF-1.4 a tiny pdf'.length }],
    emailId,
    receivedAt: expect.any(String),
  });
  expect(page.data[0]).toEqual(got.body);

  const original = await svc.api.get(`/inbound-emails/${id}/raw`, key);
  expect(original.status).toBe(200);
  expect(original.headers.get('content-type')).toBe('message/rfc822');
  expect(original.body).toBe(raw);

  // The event, on the contact that was sent the email (still subscribed).
  expect(await receivedEvents()).toEqual([
    { contact_id: contactId, data: { inboundEmailId: id, emailId, subject: 'Re: Your receipt', from: 'ann@example.org' } },
  ]);
  expect((await svc.api.get(`/contacts/${contactId}`, key)).body.subscribed).toBe(true);
  // The activity feed shows it as inbound mail.
  expect(JSON.stringify((await svc.api.get('/activity?limit=50', key)).body)).toContain(id);

  // The webhook endpoint subscribed to email.received gets it, signed.
  const delivered = await until(async () => receiver.received[0], 20_000, 'the webhook delivery');
  const payload = new Webhook(hookSecret).verify(delivered.body, delivered.headers) as { type: string; data: Record<string, unknown> };
  expect(payload).toMatchObject({ type: 'email.received', data: { inboundEmailId: id, emailId, from: 'ann@example.org', contact: { id: contactId } } });

  // The automation triggered by email.received ran for the contact.
  await until(async () => ((await svc.api.get(`/contacts/${contactId}`, key)).body.data?.replied === true ? true : undefined), 20_000, 'the automation step');
  const runs = (await svc.api.get(`/workflows/${automationId}/executions`, key)).body.data;
  expect(runs).toEqual([expect.objectContaining({ contactId })]);

  // The same message again (a relay that lost our 250) is stored once.
  expect((await deliver('ann@example.org', ['support@inbound.acme.test'], raw)).data).toMatch(/^250 /);
  expect((await list()).total).toBe(1);
});

test("a stranger's mail makes a new contact, unsubscribed, and links to nothing", async () => {
  const raw = message(
    { From: 'Zed <zed@stranger.example>', To: 'hello@inbound.acme.test', Subject: 'A question', 'In-Reply-To': '<not-ours@acme.test>' },
    'Hi there',
  );
  expect((await deliver('zed@stranger.example', ['hello@inbound.acme.test'], raw)).data).toMatch(/^250 /);
  const [latest] = (await list()).data;
  expect(latest).toMatchObject({ from: 'zed@stranger.example', subject: 'A question', text: 'Hi there\n', emailId: null });
  const contacts = (await svc.api.get('/contacts?search=zed@stranger.example', key)).body.data;
  expect(contacts).toEqual([expect.objectContaining({ email: 'zed@stranger.example', subscribed: false })]);
  expect((await receivedEvents()).at(-1)).toEqual({
    contact_id: contacts[0].id,
    data: { inboundEmailId: latest.id, emailId: null, subject: 'A question', from: 'zed@stranger.example' },
  });
});

test("another project's key sees none of it: 404 for the message and its original, an empty list", async () => {
  const other = await createAccount(svc.api, 'Other');
  const otherKey = { key: other.project.secretKey };
  const [latest] = (await list()).data;
  expect((await svc.api.get(`/inbound-emails/${latest.id}`, otherKey)).status).toBe(404);
  expect((await svc.api.get(`/inbound-emails/${latest.id}/raw`, otherKey)).status).toBe(404);
  expect((await list(otherKey)).total).toBe(0);
  // The public key cannot read received mail either.
  expect((await svc.api.get('/inbound-emails', { key: acct.project.publicKey })).status).toBe(401);
});

test('no relaying: another domain, an unverified domain and a look-alike host are refused at RCPT', async () => {
  await svc.api.post('/domains', { domain: 'pending.test' }, key);
  const before = (await list()).total;
  const res = await deliver(
    'x@example.org',
    ['someone@example.org', 'a@inbound.pending.test', 'a@inbound.acme.test.evil.example', 'a@inbound.nowhere.test'],
    message({ From: 'x@example.org' }, 'relay me'),
  );
  expect(res.rcpt).toEqual([
    expect.stringMatching(/^550 5\.1\.1 /),
    expect.stringMatching(/^550 5\.1\.1 /),
    expect.stringMatching(/^550 5\.1\.1 /),
    expect.stringMatching(/^550 5\.1\.1 /),
  ]);
  expect((await list()).total).toBe(before);
});

test(`a message larger than INBOUND_EMAIL_MAX_MB (${MAX_KB} KB here) is refused with 552 and nothing is stored`, async () => {
  const before = (await list()).total;
  const res = await deliver(
    'big@example.org',
    ['in@inbound.acme.test'],
    message({ From: 'big@example.org', Subject: 'Big' }, 'x'.repeat(76).concat('\r\n').repeat(1000)),
  );
  expect(res.data).toMatch(/^552 5\.3\.4 /);
  expect((await list()).total).toBe(before);
});

test('an auto-reply or a bounce to the inbound host is recognised and not stored as received mail', async () => {
  const before = (await list()).total;
  const events = (await receivedEvents()).length;
  const auto = message(
    { From: 'ann@example.org', To: 'support@inbound.acme.test', Subject: 'Out of office: Re: Your receipt', 'Auto-Submitted': 'auto-replied' },
    'I am away until Monday.',
  );
  expect((await deliver('ann@example.org', ['support@inbound.acme.test'], auto)).data).toMatch(/^250 /);
  const bounce = message({ From: 'MAILER-DAEMON@example.org', To: 'support@inbound.acme.test', Subject: 'Undelivered Mail Returned to Sender' }, 'It failed.');
  expect((await deliver('', ['support@inbound.acme.test'], bounce)).data).toMatch(/^250 /);
  expect((await list()).total).toBe(before);
  expect(await receivedEvents()).toHaveLength(events);
  // Kept in the MX's report log for the operator, changing nothing.
  const logged = await dbQuery(
    svc.databaseUrl,
    `SELECT kind, envelope_to FROM inbound_reports WHERE envelope_to = 'support@inbound.acme.test' ORDER BY received_at`,
  );
  expect(logged).toEqual([
    { kind: 'auto-reply', envelope_to: 'support@inbound.acme.test' },
    { kind: expect.any(String), envelope_to: 'support@inbound.acme.test' },
  ]);
});

test('a hostile message to the inbound host is stored cleaned: NUL, invalid UTF-8 and a flood of headers', async () => {
  const junk = Array.from({ length: 1000 }, (_, i) => `X-Junk-${i}: ${'j'.repeat(20)}`).join('\r\n');
  const raw = message(
    { From: 'Eve\u0000 <eve@example.org>', To: 'in@inbound.acme.test', Subject: 'Hi\u0000there', 'Content-Type': 'text/plain; charset=utf-8' },
    'bad bytes: \u00ff\u00fe and a NUL\u0000 here',
  ).replace('\r\n\r\n', `\r\n${junk}\r\n\r\n`);
  expect((await deliver('eve@example.org', ['in@inbound.acme.test'], raw)).data).toMatch(/^250 /);
  const [latest] = (await list()).data;
  expect(latest).toMatchObject({ from: 'eve@example.org', subject: 'Hithere' });
  expect(latest.text).toMatch(/^bad bytes: .* and a NUL here/);
  expect(latest.text).not.toContain('\u0000');
  expect(latest.headers.length).toBeLessThanOrEqual(500);
});
