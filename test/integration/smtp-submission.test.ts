import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';
import nodemailer from 'nodemailer';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { freePort } from '../../src/db/embedded-postgres';
import { dbQuery } from '../setup/db';
import { dkimStatus } from '../setup/dkim';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog, testCertificate } from '../setup/smtp-client';
import { type Received, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

const run = promisify(execFile);

let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let acct: Account;
let cert: ReturnType<typeof testCertificate>;
let port: number;
let tlsPort: number;
const RATE_LIMIT = 100;
const MAX_BYTES = Math.floor(0.25 * 2 ** 20);

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  cert = testCertificate();
  port = await freePort();
  tlsPort = await freePort();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: relay.url,
    PUBLIC_URL: 'https://mail.postbox.test',
    SMTP_SUBMISSION_PORT: String(port),
    SMTP_SUBMISSION_TLS_PORT: String(tlsPort),
    SMTP_SUBMISSION_TLS_CERT: cert.cert,
    SMTP_SUBMISSION_TLS_KEY: cert.key,
    MESSAGE_MAX_MB: '0.25',
    RATE_LIMIT_PER_MINUTE: String(RATE_LIMIT),
  });
  acct = await createAccount(svc.api);
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'acme.test');
});
afterAll(async () => {
  await svc?.stop();
  await relay?.stop();
  await dns?.stop();
});
beforeEach(() => {
  relay.received.length = 0;
});

const key = () => ({ key: acct.project.secretKey });

/** nodemailer's SMTP transport, as an application configures it: host, port, user, the secret key as password. */
function transport(opts: { secure?: boolean; port?: number; password?: string; requireTLS?: boolean } = {}) {
  return nodemailer.createTransport({
    host: '127.0.0.1',
    port: opts.port ?? port,
    secure: opts.secure ?? false,
    requireTLS: opts.requireTLS ?? false,
    ignoreTLS: !opts.requireTLS && !opts.secure,
    auth: { user: 'apikey', pass: opts.password ?? acct.project.secretKey },
    tls: { ca: cert.pem, servername: 'smtp.postbox.test' },
  });
}

/** The ids of a `250 2.0.0 OK <id> <id>` reply. */
function idsOf(response: string): string[] {
  const m = /^250 2\.0\.0 OK ((?:[0-9a-f-]{36} ?)+)$/.exec(response.trim());
  if (!m) throw new Error(`not an acceptance: ${response}`);
  return m[1].trim().split(' ');
}

const header = (r: Received, name: string) => {
  const line = r.parsed.headerLines.find((h) => h.key === name.toLowerCase())?.line;
  return line?.slice(line.indexOf(':') + 1).trim();
};

const byRecipient = (to: string) => relay.received.find((r) => r.envelope.to.includes(to))!;

const png = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5c2f5a90000000049454e44ae426082',
  'hex',
);

describe('an application sending over SMTP', () => {
  test("nodemailer on loopback: each envelope recipient gets its own DKIM-signed email, with the client's parts, Cc shown and Bcc gone", async () => {
    const info = await transport().sendMail({
      from: '"Acme Support" <support@acme.test>',
      to: 'Ada Lovelace <ada@example.org>',
      cc: 'Grace <grace@example.org>',
      bcc: 'audit@example.org',
      replyTo: 'help@acme.test',
      subject: 'Your invoice — März 📄',
      text: "The client's own text part.",
      html: '<p>Your invoice is attached.</p><img src="cid:logo@acme"><a href="https://acme.test/billing">Billing</a>',
      headers: { 'X-Ticket': 'T-42', 'In-Reply-To': '<thread-1@acme.test>' },
      attachments: [
        { filename: 'invoice.pdf', content: crypto.randomBytes(3000), contentType: 'application/pdf' },
        { filename: 'logo.png', content: png, cid: 'logo@acme' },
      ],
    });
    const ids = idsOf(info.response);
    expect(ids).toHaveLength(3);
    await relay.waitFor(3);

    const ada = byRecipient('ada@example.org');
    expect(ada.envelope.from).toBe('support@acme.test');
    expect((await dkimStatus(ada.raw, dns, 'support@acme.test')).result).toBe('pass');
    expect(ada.parsed.subject).toBe('Your invoice — März 📄');
    expect((ada.parsed.to as any).value).toEqual([{ address: 'ada@example.org', name: 'Ada Lovelace' }]);
    expect((ada.parsed.cc as any).value).toEqual([{ address: 'grace@example.org', name: 'Grace' }]);
    expect(header(ada, 'bcc')).toBeUndefined();
    expect(ada.raw.toString()).not.toContain('audit@example.org');
    expect((ada.parsed.replyTo as any).value[0].address).toBe('help@acme.test');
    expect(header(ada, 'x-ticket')).toBe('T-42');
    expect(header(ada, 'in-reply-to')).toBe('<thread-1@acme.test>');
    expect(ada.parsed.text?.trim()).toBe("The client's own text part.");
    // Tracking as the project has it: links rewritten, a pixel; the inline image still referenced by its
    // Content-ID (the reader resolves cid:logo@acme to the part, which mailparser shows as a data: URL).
    expect(ada.raw.toString().replace(/=\r\n/g, '')).toContain('src=3D"cid:logo@acme"');
    expect(ada.parsed.html).toContain('<img src="data:image/png;base64,');
    expect(ada.parsed.html).not.toContain('href="https://acme.test/billing"');
    expect(ada.parsed.attachments.map((a) => [a.filename, a.contentType, a.cid ?? null])).toEqual(
      expect.arrayContaining([
        ['invoice.pdf', 'application/pdf', null],
        ['logo.png', 'image/png', 'logo@acme'],
      ]),
    );
    // The Bcc recipient got an email too, and nobody's copy names them.
    expect(byRecipient('audit@example.org').raw.toString()).not.toMatch(/^bcc:/im);

    // The ids are email records: in /activity and in each contact's events, as /v1/send's are.
    const rows = await dbQuery(svc.databaseUrl, 'SELECT id, to_email, status FROM emails WHERE id = ANY($1::uuid[]) ORDER BY to_email', [ids]);
    expect(rows.map((r) => r.to_email)).toEqual(['ada@example.org', 'audit@example.org', 'grace@example.org']);
    const activity = await until(
      async () => {
        const feed = (await svc.api.get('/activity?limit=50', key())).body.data as Array<{ type: string; emailId: string | null }>;
        const sent = feed.filter((e) => e.type === 'email.sent' && ids.includes(e.emailId ?? ''));
        return sent.length === 3 ? feed : undefined;
      },
      20_000,
      'email.sent in /activity',
    );
    expect(activity.filter((e) => ids.includes(e.emailId ?? '')).length).toBeGreaterThanOrEqual(3);
    const contact = (await svc.api.get('/contacts?search=ada@example.org', key())).body.data[0];
    expect(contact).toMatchObject({ email: 'ada@example.org', subscribed: false });
    const events = (await svc.api.get(`/events/contact/${contact.id}`, key())).body;
    expect(JSON.stringify(events)).toContain(ids.find((id) => rows.find((r) => r.id === id)?.to_email === 'ada@example.org'));
  });

  test('HTML alone gets a text part made from it; text alone stays text only', async () => {
    const t = transport();
    await t.sendMail({ from: 'hi@acme.test', to: 'html@example.org', subject: 'h', html: '<h1>Welcome</h1><p>Glad you are here.</p>' });
    await t.sendMail({ from: 'hi@acme.test', to: 'text@example.org', subject: 't', text: 'cron: backup finished, 0 errors' });
    await relay.waitFor(2);
    const html = byRecipient('html@example.org');
    expect(html.parsed.text).toMatch(/Glad you are here\./);
    const text = byRecipient('text@example.org');
    expect(text.parsed.html).toBe(false);
    expect(text.parsed.text?.trim()).toBe('cron: backup finished, 0 errors');
    expect((await dkimStatus(text.raw, dns, 'hi@acme.test')).result).toBe('pass');
  });

  test('the same message again (same Message-ID) is answered with the same ids and sends nothing new', async () => {
    const message = { from: 'hi@acme.test', to: 'twice@example.org', subject: 'once', text: 'only once', messageId: `<retry-${Date.now()}@app.example>` };
    const first = idsOf((await transport().sendMail(message)).response);
    const second = idsOf((await transport().sendMail(message)).response);
    expect(second).toEqual(first);
    const rows = await dbQuery(svc.databaseUrl, `SELECT id FROM emails WHERE to_email = 'twice@example.org'`);
    expect(rows.map((r) => r.id)).toEqual(first);
  });

  test('X-Postbox-Template renders a template with X-Postbox-Data; X-Postbox-Subscribed and X-Postbox-Tracking apply; none of them is delivered', async () => {
    const tpl = await svc.api.post(
      '/templates',
      {
        name: 'Welcome',
        subject: 'Hi {{name}}',
        body: '<p>Hello {{name}}, see <a href="https://acme.test/x">this</a>.</p>',
        type: 'TRANSACTIONAL',
        from: 'hi@acme.test',
      },
      key(),
    );
    expect(tpl.status).toBe(201);
    const info = await transport().sendMail({
      from: 'hi@acme.test',
      to: 'tpl@example.org',
      subject: '',
      text: 'ignored: the template is the body',
      headers: {
        'X-Postbox-Template': tpl.body.id,
        'X-Postbox-Data': JSON.stringify({ name: 'Lin' }),
        'X-Postbox-Subscribed': 'true',
        'X-Postbox-Tracking': 'none',
      },
    });
    idsOf(info.response);
    const [got] = await relay.waitFor(1);
    expect(got.parsed.subject).toBe('Hi Lin');
    expect(got.parsed.html).toContain('Hello Lin, see <a href="https://acme.test/x">this</a>.');
    expect(got.parsed.html).not.toContain('/t/o/');
    expect(got.parsed.headerLines.filter((h) => h.key.startsWith('x-postbox'))).toEqual([]);
    const contact = (await svc.api.get('/contacts?search=tpl@example.org', key())).body.data[0];
    expect(contact).toMatchObject({ subscribed: true, data: expect.objectContaining({ name: 'Lin' }) });
  });

  test('swaks over STARTTLS with AUTH LOGIN; nodemailer over implicit TLS', async () => {
    const { stdout } = await run('swaks', [
      '--server',
      `127.0.0.1:${port}`,
      '--tls',
      '--auth',
      'LOGIN',
      '--auth-user',
      'app',
      '--auth-password',
      acct.project.secretKey,
      '--from',
      'ops@acme.test',
      '--to',
      'swaks@example.org',
      '--header',
      'Subject: from swaks',
      '--body',
      'sent by swaks',
    ]);
    // `<~` marks what came over TLS.
    expect(stdout).toMatch(/-> STARTTLS\n<- {2}220 [\s\S]*~> AUTH LOGIN[\s\S]*<~ {2}235 [\s\S]*<~ {2}250 2\.0\.0 OK [0-9a-f-]{36}\n/);
    const tls = await transport({ secure: true, port: tlsPort }).sendMail({
      from: 'hi@acme.test',
      to: 'implicit@example.org',
      subject: 'tls',
      text: 'over implicit TLS',
    });
    idsOf(tls.response);
    await relay.waitFor(2);
    for (const [to, from] of [
      ['swaks@example.org', 'ops@acme.test'],
      ['implicit@example.org', 'hi@acme.test'],
    ]) {
      expect((await dkimStatus(byRecipient(to).raw, dns, from)).result).toBe('pass');
    }
    expect(byRecipient('swaks@example.org').parsed.text?.trim()).toBe('sent by swaks');
  });

  test('nodemailer with requireTLS upgrades with STARTTLS and sends', async () => {
    idsOf((await transport({ requireTLS: true }).sendMail({ from: 'hi@acme.test', to: 'starttls@example.org', subject: 's', text: 'upgraded' })).response);
    await relay.waitFor(1);
  });
});

describe('refusals carry the codes an SMTP client understands', () => {
  async function authed(password = acct.project.secretKey) {
    const { dialog } = await SmtpDialog.open(port);
    const ehlo = await dialog.command('EHLO app.example');
    const auth = await dialog.authPlain('app', password);
    return { dialog, ehlo, auth };
  }

  test('a public key, an unknown key, a disabled project: 535 5.7.8', async () => {
    for (const password of [acct.project.publicKey, 'sk_' + '0'.repeat(48), 'not a key']) {
      const { dialog, auth } = await authed(password);
      expect(auth).toMatch(/^535 5\.7\.8 /);
      dialog.close();
    }
    const other = await createAccount(svc.api, 'Disabled');
    await dbQuery(svc.databaseUrl, `UPDATE projects SET disabled = true, disabled_reason = 'test' WHERE id = $1`, [other.project.id]);
    await until(
      async () => {
        const { dialog, auth } = await authed(other.project.secretKey);
        dialog.close();
        return /^535 5\.7\.8 .*disabled/.test(auth) ? true : undefined;
      },
      10_000,
      'the disabled project refused',
    );
  });

  test('EHLO announces SIZE, PIPELINING, 8BITMIME, SMTPUTF8 and AUTH; mail without AUTH is 530', async () => {
    const { dialog } = await SmtpDialog.open(port);
    const ehlo = await dialog.command('EHLO app.example');
    for (const feature of [`SIZE ${MAX_BYTES}`, 'PIPELINING', '8BITMIME', 'SMTPUTF8', 'AUTH PLAIN LOGIN', 'STARTTLS']) expect(ehlo).toContain(feature);
    expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^530 /);
    dialog.close();
  });

  test('a sender domain not verified: 550 5.7.1 at MAIL FROM, or after DATA for the From: header', async () => {
    const { dialog, auth } = await authed();
    expect(auth).toMatch(/^235 /);
    const refused = await dialog.command('MAIL FROM:<hi@elsewhere.test>');
    expect(refused).toMatch(/^550 5\.7\.1 .*elsewhere\.test/);
    expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^250 /);
    expect(await dialog.command('RCPT TO:<x@example.org>')).toMatch(/^250 /);
    const afterData = await dialog.data('From: Someone <someone@forged.test>\nTo: x@example.org\nSubject: s\n\nbody\n');
    expect(afterData).toMatch(/^550 5\.7\.1 .*forged\.test/);
    dialog.close();
    expect(await dbQuery(svc.databaseUrl, `SELECT 1 FROM emails WHERE to_email = 'x@example.org'`)).toEqual([]);
  });

  test('51 recipients: the 51st is 452 4.5.3, the first 50 are sent', async () => {
    const { dialog } = await authed();
    expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^250 /);
    for (let i = 0; i < 50; i++) expect(await dialog.command(`RCPT TO:<many${i}@example.org>`)).toMatch(/^250 /);
    expect(await dialog.command('RCPT TO:<many50@example.org>')).toMatch(/^452 4\.5\.3 /);
    const reply = await dialog.data('From: hi@acme.test\nSubject: many\n\nhello\n');
    expect(idsOf(reply)).toHaveLength(50);
    dialog.close();
  });

  test('too big: 552 at MAIL FROM for an announced size, 552 5.3.4 after DATA for a message over it', async () => {
    const { dialog } = await authed();
    expect(await dialog.command(`MAIL FROM:<hi@acme.test> SIZE=${MAX_BYTES + 1}`)).toMatch(/^552 /);
    expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^250 /);
    expect(await dialog.command('RCPT TO:<big@example.org>')).toMatch(/^250 /);
    const reply = await dialog.data(
      `From: hi@acme.test\nSubject: big\n\n${'x'.repeat(76)}\n`.repeat(1) + `${'y'.repeat(76)}\n`.repeat(Math.ceil(MAX_BYTES / 77) + 10),
    );
    expect(reply).toMatch(/^552 5\.3\.4 /);
    // The connection goes on: the next message is accepted.
    expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^250 /);
    expect(await dialog.command('RCPT TO:<small@example.org>')).toMatch(/^250 /);
    expect(idsOf(await dialog.data('From: hi@acme.test\nSubject: small\n\nsmall\n'))).toHaveLength(1);
    dialog.close();
  });

  test('bad steering headers are 550 5.6.0 naming the header', async () => {
    const { dialog } = await authed();
    for (const [headerLine, named] of [
      ['X-Postbox-Template: 42', 'X-Postbox-Template'],
      ['X-Postbox-Data: {not json', 'X-Postbox-Data'],
      ['X-Postbox-Tracking: sometimes', 'X-Postbox-Tracking'],
    ]) {
      expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^250 /);
      expect(await dialog.command('RCPT TO:<steer@example.org>')).toMatch(/^250 /);
      const reply = await dialog.data(`From: hi@acme.test\n${headerLine}\nSubject: s\n\nbody\n`);
      expect(reply).toMatch(new RegExp(`^550 5\\.6\\.0 ${named}`));
    }
    dialog.close();
  });

  test("the project's rate limit is shared with HTTP: over it, MAIL FROM is 451 4.7.1", async () => {
    const other = await createAccount(svc.api, 'Rate limited');
    await verifiedDomain(svc.api, dns, other.project.secretKey, 'busy.test');
    // Spend the minute's allowance over HTTP until it says 429, then ask over SMTP (again, should the minute turn in between).
    let reply = '';
    for (let attempt = 0; attempt < 2 && !reply.startsWith('451'); attempt++) {
      for (let i = 0; i < 2 * RATE_LIMIT; i++) if ((await svc.api.get('/contacts', { key: other.project.secretKey })).status === 429) break;
      const { dialog, auth } = await authed(other.project.secretKey);
      expect(auth).toMatch(/^235 /);
      reply = await dialog.command('MAIL FROM:<hi@busy.test>');
      dialog.close();
    }
    expect(reply).toMatch(/^451 4\.7\.1 /);
  });
});

test('a submitted message to a suppressed address is accepted and recorded SUPPRESSED, never relayed; its other recipient gets it', async () => {
  const listed = `listed-${Date.now()}@example.org`;
  const other = `other-${Date.now()}@example.org`;
  expect((await svc.api.post('/suppressions', { emails: [listed] }, key())).status).toBe(200);
  const info = await transport().sendMail({ from: 'hi@acme.test', to: [listed, other], subject: 'Receipt', text: 'thanks' });
  const [first, second] = idsOf(info.response);
  await until(async () => relay.received.find((r) => r.envelope.to.includes(other)), 20_000, 'the other recipient');
  const rows = await dbQuery<{ id: string; to_email: string; status: string }>(svc.databaseUrl, `SELECT id, to_email, status FROM emails WHERE id = ANY($1)`, [
    [first, second],
  ]);
  expect(rows.find((r) => r.to_email === listed)!.status).toBe('SUPPRESSED');
  expect(relay.received.some((r) => r.envelope.to.includes(listed))).toBe(false);
});
