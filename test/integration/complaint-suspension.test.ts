/**
 * Who can suspend a project with complaints (issue 45, H2). Anyone can forge an ARF report, so only an
 * authenticated complaint (DMARC pass of its author domain, or handed to the email's return path by
 * the recipient domain's own MX) counts; complaints about confirmation mails never count; and the
 * counted ones must come from SECURITY_MIN_COMPLAINT_DOMAINS recipient domains. Nor do forged bounces of
 * confirmation mails count toward the bounce rate. Default thresholds.
 */
import { dkimSign } from 'mailauth';
import { freePort } from '../../src/db/embedded-postgres';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { generateDkimKeyPair } from '../../src/modules/domains/domain-records';
import { dbQuery } from '../setup/db';
import { publishReturnPath, verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpDialog } from '../setup/smtp-client';
import { type Received, SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let relay: SmtpSink;
let svc: TestService;
let mxPort: number;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  relay = await new SmtpSink().start();
  mxPort = await freePort();
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: relay.url,
    PUBLIC_URL: 'https://mail.postbox.test',
    INBOUND_SMTP_PORT: String(mxPort),
  });
});
afterAll(async () => {
  await svc?.stop();
  await relay?.stop();
  await dns?.stop();
});

interface Sender {
  acct: Account;
  domain: string;
  key: { key: string };
}

/** A project sending from `domain` with its return path published, double opt-in on, that has sent `count` emails. */
async function sender(name: string, domain: string, count: number): Promise<Sender> {
  const acct = await createAccount(svc.api, name);
  const key = { key: acct.project.secretKey };
  const d = await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  await publishReturnPath(svc.api, dns, acct.project.secretKey, d.id);
  await svc.api.patch(`/users/@me/projects/${acct.project.id}`, { settings: { doubleOptIn: true } }, { cookie: acct.cookie });
  for (let i = 0; i < count; i += 50) {
    const to = Array.from({ length: Math.min(50, count - i) }, (_, j) => `reader${i + j}@example.org`);
    const res = await svc.api.post('/v1/send', { to, from: `news@${domain}`, subject: 'News', body: '<p>News</p>' }, key);
    expect(res.status).toBe(200);
  }
  await until(async () => (relay.received.filter((r) => r.envelope.from?.endsWith(`@bounces.${domain}`)).length >= count ? true : undefined), 60_000, 'sent');
  return { acct, domain, key };
}

const arrived = (to: string) => until(async () => relay.received.find((r) => r.envelope.to.includes(to)), 20_000, `mail to ${to}`);

/** An ARF report (RFC 5965) from `from` about the message with `messageId`, as a mailbox provider writes one. */
function arf(from: string, rcpt: string, messageId: string, recipient: string): string {
  const id = `<arf-${Math.random().toString(36).slice(2)}@${from.split('@')[1]}>`;
  return [
    `From: <${from}>`,
    `To: <${rcpt}>`,
    `Date: ${new Date().toUTCString()}`,
    `Subject: Complaint about a message`,
    `Message-ID: ${id}`,
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=feedback-report; boundary="arf"',
    '',
    '--arf',
    'Content-Type: text/plain',
    '',
    'This is an email abuse report.',
    '',
    '--arf',
    'Content-Type: message/feedback-report',
    '',
    'Feedback-Type: abuse',
    'User-Agent: Test-FBL/1.0',
    'Version: 1',
    `Original-Rcpt-To: <${recipient}>`,
    '',
    '--arf',
    'Content-Type: text/rfc822-headers',
    '',
    `Message-ID: ${messageId}`,
    `To: <${recipient}>`,
    'Subject: News',
    '',
    '--arf--',
    '',
  ].join('\r\n');
}

/** A mailbox provider's feedback loop: its reports are DKIM-signed by `domain`, which publishes DMARC. */
function provider(domain: string) {
  const keys = generateDkimKeyPair();
  dns.add(`fbl._domainkey.${domain}`, 'TXT', `v=DKIM1; k=rsa; p=${keys.publicKey}`);
  dns.add(`_dmarc.${domain}`, 'TXT', 'v=DMARC1; p=reject');
  return async (message: string) => {
    const signed = await dkimSign(message, {
      signingDomain: domain,
      selector: 'fbl',
      privateKey: keys.privateKey,
      signatureData: [{ signingDomain: domain, selector: 'fbl', privateKey: keys.privateKey }],
    });
    return signed.signatures + message;
  };
}

async function deliver(rcpt: string, message: string, from = ''): Promise<string> {
  const { dialog } = await SmtpDialog.open(mxPort);
  await dialog.command('EHLO mx.provider.test');
  await dialog.command(`MAIL FROM:<${from}>`);
  expect(await dialog.command(`RCPT TO:<${rcpt}>`)).toMatch(/^250 /);
  const reply = await dialog.data(message.replace(/\r\n/g, '\n'));
  dialog.close();
  return reply;
}

const messageIdOf = (r: Received) => r.parsed.messageId!.replace(/^<?/, '<').replace(/>?$/, '>');
const complaints = async (projectId: string) =>
  dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE project_id = $1 AND name = 'email.complaint' ORDER BY created_at`, [projectId]);
const security = async (s: Sender) => (await svc.api.get(`/projects/${s.acct.project.id}/security`, { cookie: s.acct.cookie })).body;
const sendStatus = async (s: Sender) =>
  (await svc.api.post('/v1/send', { to: 'later@example.org', from: `news@${s.domain}`, subject: 'Hi', body: 'x' }, s.key)).status;

test('the audit: a forged complaint about a confirmation mail, at the feedback-loop address and the return path, suspends nothing', async () => {
  const s = await sender('Audited', 'audited.test', 150);
  // An anonymous visitor signs their own address up and receives the confirmation mail.
  expect((await svc.api.post('/v1/subscribe', { email: 'visitor@attacker.test' }, { key: s.acct.project.publicKey })).status).toBe(200);
  const confirmation = await arrived('visitor@attacker.test');
  const forged = arf('abuse@attacker.test', `fbl@bounces.${s.domain}`, messageIdOf(confirmation), 'visitor@attacker.test');
  expect(await deliver(`fbl@bounces.${s.domain}`, forged)).toMatch(/^250 /);
  expect(await deliver(confirmation.envelope.from!, forged.replace(/Message-ID: <arf-/, 'Message-ID: <arf2-'))).toMatch(/^250 /);

  // The complaint unsubscribes its own contact, and is kept as unauthenticated.
  const [complaint] = await until(async () => ((await complaints(s.acct.project.id)).length ? complaints(s.acct.project.id) : undefined), 10_000, 'recorded');
  expect(complaint.data).toMatchObject({ source: 'inbound', authenticated: false });
  const state = await security(s);
  expect(state).toMatchObject({ status: 'ok', disabled: false, complained: 0 });
  expect(state.sent).toBeGreaterThanOrEqual(150);
  expect(await sendStatus(s)).toBe(200);
});

test('authenticated complaints suspend once they come from three recipient domains; unauthenticated ones never', async () => {
  const s = await sender('Complained', 'complained.test', 150);
  const reader = async (to: string) => {
    const res = await svc.api.post('/v1/send', { to, from: `news@${s.domain}`, subject: 'News', body: '<p>News</p>' }, s.key);
    expect(res.status).toBe(200);
    return arrived(to);
  };
  // Forged complaints about ordinary mail from three domains: unsubscribed, not counted.
  for (const d of ['one.test', 'two.test', 'three.test']) {
    const m = await reader(`forged@${d}`);
    await deliver(`fbl@bounces.${s.domain}`, arf(`fbl@${d}`, `fbl@bounces.${s.domain}`, messageIdOf(m), `forged@${d}`));
  }
  await until(async () => ((await complaints(s.acct.project.id)).length === 3 ? true : undefined), 10_000, 'three recorded');
  expect(await security(s)).toMatchObject({ status: 'ok', disabled: false, complained: 0 });

  // Two providers' signed feedback loops: counted, two domains, still below the three needed.
  for (const d of ['isp-one.test', 'isp-two.test']) {
    const sign = provider(d);
    const m = await reader(`reader@${d}`);
    expect(await deliver(`fbl@bounces.${s.domain}`, await sign(arf(`fbl@${d}`, `fbl@bounces.${s.domain}`, messageIdOf(m), `reader@${d}`)))).toMatch(/^250 /);
  }
  await until(async () => ((await complaints(s.acct.project.id)).length === 5 ? true : undefined), 10_000, 'five recorded');
  expect((await complaints(s.acct.project.id)).slice(3).map((c) => c.data.authentication)).toEqual([
    { method: 'dmarc', domain: 'isp-one.test' },
    { method: 'dmarc', domain: 'isp-two.test' },
  ]);
  expect(await security(s)).toMatchObject({ disabled: false, complained: 2, complaintDomains: 2 });
  expect(await sendStatus(s)).toBe(200);

  // A third domain's complaint, unsigned, handed to the email's return path by that domain's own MX: the project is suspended.
  dns.add('isp-three.test', 'MX', { exchange: 'mx.isp-three.test', priority: 10 });
  dns.add('mx.isp-three.test', 'A', '127.0.0.1');
  const m = await reader('reader@isp-three.test');
  expect(await deliver(m.envelope.from!, arf('fbl@isp-three.test', m.envelope.from!, messageIdOf(m), 'reader@isp-three.test'))).toMatch(/^250 /);
  const state = await until(
    async () => {
      const st = await security(s);
      return st.disabled ? st : undefined;
    },
    10_000,
    'suspended',
  );
  expect(state).toMatchObject({ status: 'suspended', complained: 3, complaintDomains: 3 });
  expect(state.suspensions[0]).toMatchObject({ metric: 'complaint' });
  expect(await sendStatus(s)).toBe(403);
});

test('forged hard bounces of confirmation mails, one per anonymous signup, do not count toward the bounce rate', async () => {
  const s = await sender('Bounced', 'bounced.test', 150);
  // 20 signups (the form's limit per IP an hour), 20 confirmation mails, 20 forged hard bounces: 20 of 170 is above 10%.
  for (let i = 0; i < 20; i++) {
    const email = `victim${i}@attacker.test`;
    expect((await svc.api.post('/v1/subscribe', { email }, { key: s.acct.project.publicKey })).status).toBe(200);
    const m = await arrived(email);
    const dsn = [
      'From: MAILER-DAEMON@mx.attacker.test',
      `Message-ID: <dsn-${i}-${Date.now()}@mx.attacker.test>`,
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
      'Reporting-MTA: dns; mx.attacker.test',
      '',
      `Final-Recipient: rfc822; ${email}`,
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 user unknown',
      '',
      '--b--',
      '',
    ].join('\r\n');
    expect(await deliver(m.envelope.from!, dsn)).toMatch(/^250 /);
  }
  const bounces = async () =>
    dbQuery(svc.databaseUrl, `SELECT 1 FROM events WHERE project_id = $1 AND name = 'email.bounce' AND data->>'bounceType' = 'Permanent'`, [s.acct.project.id]);
  await until(async () => ((await bounces()).length === 20 ? true : undefined), 20_000, 'twenty bounces recorded');
  expect(await security(s)).toMatchObject({ status: 'ok', disabled: false, bounced: 0 });
  expect(await sendStatus(s)).toBe(200);
});
