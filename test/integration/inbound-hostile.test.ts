/**
 * What outsiders can send to the MX, sent through the real service: no message can hold the API (issue 45, H1), and
 * no message's content can wedge the MX (issue 48): it is stored cleaned, or refused with a 5xx that says why.
 */
import fs from 'node:fs';
import path from 'node:path';
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { publishReturnPath, verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let mxPort: number;
let acct: Account;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  mxPort = await freePort();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: relay.url, PUBLIC_URL: 'https://mail.postbox.test', INBOUND_SMTP_PORT: String(mxPort) });
  acct = await createAccount(svc.api);
  const domain = await verifiedDomain(svc.api, dns, acct.project.secretKey, 'acme.test');
  await publishReturnPath(svc.api, dns, acct.project.secretKey, domain.id);
});
afterAll(async () => {
  await svc?.stop();
  await relay?.stop();
  await dns?.stop();
});

/** One message to the MX as an MTA sends a report (null sender); answers the reply to the final dot. */
async function deliver(raw: string, rcpt = 'fbl@bounces.acme.test'): Promise<string> {
  const { dialog } = await SmtpDialog.open(mxPort);
  try {
    await dialog.command('EHLO mta.test');
    expect(await dialog.command('MAIL FROM:<>')).toMatch(/^250/);
    expect(await dialog.command(`RCPT TO:<${rcpt}>`)).toMatch(/^250/);
    return await dialog.dataBytes(raw);
  } finally {
    dialog.close();
  }
}

/** The audit's message: a report of 128 text/html parts full of '<', about 1 MB. */
function auditMessage(): string {
  const part = ['--b', 'Content-Type: text/html', '', ...Array.from({ length: 100 }, () => '<'.repeat(78)), ''].join('\r\n');
  return [
    'From: MAILER-DAEMON@mx.example.net',
    'To: fbl@bounces.acme.test',
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b"',
    '',
    ...Array.from({ length: 128 }, () => part),
    '--b--',
    '',
  ].join('\r\n');
}

test('while the MX reads the audit’s 1 MB report of 128 HTML parts full of "<", /health answers within 200 ms', async () => {
  const message = auditMessage();
  expect(message.length).toBeGreaterThan(1_000_000);
  let answered = false;
  const sent = deliver(message).finally(() => (answered = true));
  const waits: number[] = [];
  while (!answered) {
    const started = performance.now();
    const res = await svc.api.get('/health');
    waits.push(performance.now() - started);
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(await sent).toMatch(/^250 /);
  expect(Math.max(...waits)).toBeLessThan(200);
});

/** Sends one email with /v1/send; answers its id and its return path (where its bounces go). */
async function sendOne(to: string): Promise<{ emailId: string; returnPath: string }> {
  const res = await svc.api.post(
    '/v1/send',
    { to, from: 'Acme <hi@acme.test>', subject: 'Hello', body: '<p>Hi</p>', subscribed: true },
    { key: acct.project.secretKey },
  );
  expect(res.status).toBe(200);
  const emailId: string = res.body.data.emails[0].email;
  const received = await until(async () => relay.received.find((r) => r.parsed.messageId?.includes(emailId)), 20_000, `${to} at the relay`);
  return { emailId, returnPath: received.envelope.from! };
}

const bounceEvent = async (emailId: string) =>
  until(
    async () => (await dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE name = 'email.bounce' AND data->>'emailId' = $1`, [emailId]))[0],
    10_000,
    'the bounce event',
  );

/** A DSN whose delivery-status part has these extra headers and this body. */
function dsn(partHeaders: string[], partBody: string[], topHeaders: string[] = []): string {
  return [
    'From: MAILER-DAEMON@mx.example.net',
    'To: bounces@acme.test',
    'Subject: Undelivered Mail Returned to Sender',
    ...topHeaders,
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain',
    '',
    'Your message could not be delivered.',
    '--b1',
    'Content-Type: message/delivery-status',
    ...partHeaders,
    '',
    ...partBody,
    '--b1--',
    '',
  ].join('\r\n');
}

/** An answer the MX may give to content: taken (250), or refused for good with a 5xx that says why. Never a 4xx. */
const TAKEN_OR_REFUSED_WITH_REASON = /^(?:250 |5\d\d \d\.\d{1,3}\.\d{1,3} \S.{10,})/;

test('the Office 365 sample (lhost-office365-01) is recorded at once, not answered 451 until the sender gives up', async () => {
  const sent = await sendOne('o365@example.org');
  const sample = fs
    .readFileSync(path.join(__dirname, '../fixtures/bounces/lhost-office365-01.eml'), 'latin1')
    .split('kijitora@example.com')
    .join('o365@example.org');
  expect(await deliver(sample, sent.returnPath)).toMatch(/^250 /);
  expect((await bounceEvent(sent.emailId)).data).toMatchObject({ bounceType: 'Permanent', status: '5.1.10', source: 'inbound' });
});

test('NUL bytes in a report, raw or encoded, are stored cleaned', async () => {
  const sent = await sendOne('nul@example.org');
  const raw = dsn(
    ['Content-Transfer-Encoding: quoted-printable'],
    [
      'Reporting-MTA: dns; mx.example.net',
      '',
      'Final-Recipient: rfc822; nul@example.org',
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 <nul@example.org>: user=00 unknown\u0000 here',
    ],
    ['Message-ID: <nul\u0000id@mx.example.net>', 'X-Junk: a\u0000b'],
  );
  expect(raw).toContain('\u0000');
  expect(await deliver(raw, sent.returnPath)).toMatch(/^250 /);
  const event = await bounceEvent(sent.emailId);
  expect(event.data).toMatchObject({ bounceType: 'Permanent', reason: 'userunknown', status: '5.1.1' });
  expect(event.data.diagnosticCode).toBe('550 5.1.1 <nul@example.org>: user unknown here');
});

describe('hostile messages to the feedback-loop address', () => {
  const huge = 'x'.repeat(1024 * 1024);
  const lines = (...l: string[]) => l.join('\r\n');
  const cases: Array<[string, string]> = [
    ['NUL bytes everywhere', lines('From: a\u0000@b.example', 'Subject: \u0000\u0000', 'Message-ID: <\u0000@x>', '', '\u0000body\u0000', '')],
    [
      'broken MIME: no closing boundary, a boundary that never comes, parts without headers',
      lines(
        'From: MAILER-DAEMON@x.example',
        'Subject: Undelivered',
        'Content-Type: multipart/report; boundary="q"',
        '',
        '--q',
        '',
        'no headers',
        '--q',
        'Content-Type: multipart/mixed; boundary="never"',
        '',
        'text',
        '',
      ),
    ],
    [
      'MIME nested 200 deep',
      lines(
        'From: MAILER-DAEMON@x.example',
        'Subject: Undelivered',
        ...Array.from({ length: 200 }, (_, i) => `Content-Type: multipart/mixed; boundary="n${i}"\r\n\r\n--n${i}`),
        '',
        'end',
        '',
      ),
    ],
    [
      'bad encodings: invalid UTF-8, an unknown charset, broken base64 and encoded words',
      lines(
        'From: =?x-nope?B?!!!?= <MAILER-DAEMON@x.example>',
        'Subject: =?utf-8?Q?=FF=FE?= Undelivered \xff\xfe',
        'Content-Type: text/plain; charset=x-unknown-charset',
        'Content-Transfer-Encoding: base64',
        '',
        '@@@not base64 at all ===',
        '\xc3\x28\xa0\xa1',
        '',
      ),
    ],
    ['a 1 MB header line', lines('From: MAILER-DAEMON@x.example', 'Subject: Undelivered', `X-Huge: ${huge}`, '', 'body', '')],
    ['20,000 header lines', lines('From: MAILER-DAEMON@x.example', ...Array.from({ length: 20_000 }, () => 'X-Many: y'), '', 'body', '')],
    ['a Message-ID of 100 KB', lines('From: MAILER-DAEMON@x.example', `Message-ID: <${'m'.repeat(100_000)}@x>`, '', 'body', '')],
  ];

  test.each(cases)('%s: taken and stored cleaned, or refused with a 5xx that says why; never a 4xx', async (_name, raw) => {
    const reply = await deliver(raw);
    expect(reply).toMatch(TAKEN_OR_REFUSED_WITH_REASON);
    // The MX still answers the next message.
    expect(await deliver('From: someone@x.example\r\nSubject: hello\r\n\r\nhi\r\n')).toMatch(/^250 /);
  });
});
