import { ZoneDnsServer } from '../../src/dns/zone-server';
import { freePort } from '../../src/db/embedded-postgres';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { SmtpSink } from '../setup/smtp-sink';

// What a submitted message may carry: exactly what /v1/send accepts, and every fault in the message is a
// permanent 550 5.6.0 (a client retries a 4xx for days). The service runs with the default size limits.
let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let acct: Account;
let port: number;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  port = await freePort();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: relay.url, SMTP_SUBMISSION_PORT: String(port) });
  acct = await createAccount(svc.api);
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'acme.test');
  await verifiedDomain(svc.api, dns, (await createAccount(svc.api, 'Bank')).project.secretKey, 'bank.test');
});
afterAll(async () => {
  await svc?.stop();
  await relay?.stop();
  await dns?.stop();
});

/** The reply to one message sent over an authenticated connection, from MAIL FROM to the final dot. */
async function submit(raw: string, to = 'victim@example.org'): Promise<string> {
  const { dialog } = await SmtpDialog.open(port);
  await dialog.command('EHLO app.example');
  expect(await dialog.authPlain('app', acct.project.secretKey)).toMatch(/^235 /);
  expect(await dialog.command('MAIL FROM:<hi@acme.test>')).toMatch(/^250 /);
  expect(await dialog.command(`RCPT TO:<${to}>`)).toMatch(/^250 /);
  const reply = await dialog.data(raw);
  dialog.close();
  return reply;
}

/** `text` as one RFC 2047 encoded-word, which a parser decodes byte for byte. */
const encodedWord = (text: string) => `=?utf-8?B?${Buffer.from(text).toString('base64')}?=`;

const written = async (to: string) => (await dbQuery(svc.databaseUrl, `SELECT id FROM emails WHERE to_email = $1`, [to])).length;

test('a bare CR in a header value (a second From: smuggled in) is 550 5.6.0; /v1/send refuses the same header with 422', async () => {
  const reply = await submit('From: hi@acme.test\nTo: victim@example.org\nSubject: s\nX-Inj: a\rFrom: ceo@bank.test\n\nbody\n', 'cr@example.org');
  expect(reply).toMatch(/^550 5\.6\.0 X-Inj: Header values cannot contain CR, LF or NUL/);
  const http = await svc.api.post(
    '/v1/send',
    { to: 'cr@example.org', from: 'hi@acme.test', subject: 's', body: 'b', headers: { 'X-Inj': 'a\rFrom: ceo@bank.test' } },
    { key: acct.project.secretKey },
  );
  expect(http.status).toBe(422);
  expect(http.body.error.errors[0].field).toBe('headers.X-Inj');
  // CR, LF and NUL in the Subject, a display name, a filename, a Content-ID and a content type: refused the same way.
  const attachment = (head: string) =>
    `From: hi@acme.test\nSubject: s\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nbody\n` +
    `--b\n${head}\nContent-Transfer-Encoding: base64\n\naGVsbG8=\n--b--\n`;
  for (const [raw, named] of [
    ['From: hi@acme.test\nSubject: a\rFrom: ceo@bank.test\n\nbody\n', /Subject/],
    ['From: "Hi\rFrom: ceo@bank.test" <hi@acme.test>\nSubject: s\n\nbody\n', /From/],
    [attachment('Content-Type: application/pdf\nContent-Disposition: attachment;\n filename="a\rb.pdf"'), /Content-Disposition/],
    [attachment('Content-Type: image/png\nContent-Disposition: inline\nContent-ID: <a\rb@acme>'), /Content-ID/],
    [attachment('Content-Type: image/png; name="a\rFrom: ceo@bank.test"'), /Content-Type/],
    [attachment('Content-Type: image/png\nContent-Disposition: attachment; filename="a\0b.png"'), /Content-Disposition/],
    ['From: hi@acme.test\nSubject: s\nX-Nul: a\0b\n\nbody\n', /X-Nul/],
    // Encoded-words decode to any byte: a Cc name of "a<CRLF>From: ceo@bank.test", and one with a NUL.
    [`From: hi@acme.test\nCc: ${encodedWord('a\r\nFrom: ceo@bank.test')} <cc@example.org>\nSubject: s\n\nbody\n`, /Cc: Cannot contain line breaks or NUL/],
    [`From: hi@acme.test\nCc: ${encodedWord('a\0b')} <cc@example.org>\nSubject: s\n\nbody\n`, /Cc: .*NUL/],
    [`From: ${encodedWord('Hi\r\nFrom: ceo@bank.test')} <hi@acme.test>\nSubject: s\n\nbody\n`, /From: Cannot contain line breaks/],
  ] as const) {
    expect(await submit(raw, 'cr@example.org')).toMatch(new RegExp(`^550 5\\.6\\.0 .*${named.source}`));
  }
  expect(await written('cr@example.org')).toBe(0);
});

test('what /v1/send refuses is refused after DATA too: 990 attachments, a 100 KB Subject, From: <a@b.test@example.test>', async () => {
  const parts = Array.from({ length: 990 }, (_, i) => `--b\nContent-Type: text/plain\nContent-Disposition: attachment; filename="f${i}.txt"\n\nx\n`).join('');
  const many =
    `From: hi@acme.test\nSubject: s\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=b` +
    `\n\n--b\nContent-Type: text/plain\n\nbody\n${parts}--b--\n`;
  expect(await submit(many, 'limits@example.org')).toMatch(/^550 5\.6\.0 attachments: /);
  expect(await submit(`From: hi@acme.test\nSubject: ${'s'.repeat(100_000)}\n\nbody\n`, 'limits@example.org')).toMatch(/^550 5\.6\.0 Subject: /);
  expect(await submit('From: <a@b.test@example.test>\nSubject: s\n\nbody\n', 'limits@example.org')).toMatch(/^550 5\.6\.0 From/);
  expect(await written('limits@example.org')).toBe(0);
});

test('faults in the message are permanent, 550 5.6.0 with the reason: NUL in the body, X-Postbox-Data 5,000 deep, a header block over 1 MB', async () => {
  expect(await submit('From: hi@acme.test\nSubject: s\n\nbo\0dy\n', 'faults@example.org')).toMatch(/^550 5\.6\.0 the body: .*NUL/);
  const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
  expect(await submit(`From: hi@acme.test\nSubject: s\nX-Postbox-Data: {"a": ${deep}}\n\nbody\n`, 'faults@example.org')).toMatch(/^550 5\.6\.0 X-Postbox-Data/);
  const bigHead = Array.from({ length: 12_000 }, (_, i) => `X-Filler-${i}: ${'v'.repeat(90)}`).join('\n');
  expect(await submit(`From: hi@acme.test\nSubject: s\n${bigHead}\n\nbody\n`, 'faults@example.org')).toMatch(/^550 5\.6\.0 /);
  expect(await written('faults@example.org')).toBe(0);
  // The connection's client is fine: a good message right after is accepted and delivered.
  expect(await submit('From: hi@acme.test\nSubject: fine\n\nbody\n', 'faults@example.org')).toMatch(/^250 2\.0\.0 OK /);
});
