/**
 * What outsiders can send to the MX, sent through the real service: no message can hold the API (issue 45, H1), and
 * no message's content can wedge the MX (issue 48): it is stored cleaned, or refused with a 5xx that says why.
 */
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { publishReturnPath, verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { SmtpSink } from '../setup/smtp-sink';

let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let mxPort: number;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  mxPort = await freePort();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: relay.url, PUBLIC_URL: 'https://mail.postbox.test', INBOUND_SMTP_PORT: String(mxPort) });
  const acct = await createAccount(svc.api);
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
    return await dialog.data(raw);
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
