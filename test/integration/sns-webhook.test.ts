import { dbQuery } from '../setup/db';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { sesAcceptText, sesEvent, SnsStandIn } from '../setup/sns';
import { until } from '../setup/until';

let sns: SnsStandIn;
let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;
let acct: Account;
let key: { key: string };
/** The topic the stand-in signs from unless told otherwise. */
const TOPIC = 'arn:aws:sns:eu-west-1:123456789012:ses-events';

beforeAll(async () => {
  sns = await new SnsStandIn().start();
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  smtp.acceptText = sesAcceptText;
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: smtp.url,
    SNS_CERT_HOSTS: sns.host,
    SNS_TOPIC_ARNS: `arn:aws:sns:us-east-1:111111111111:other, ${TOPIC}`,
  });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'ses.test');
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
  sns.stop();
});

const signed = (...args: Parameters<SnsStandIn['signed']>) => sns.signed(...args);

const post = (m: unknown) => svc.api.request('POST', '/webhooks/sns', { raw: JSON.stringify(m), headers: { 'content-type': 'text/plain; charset=UTF-8' } });

/** Sends a real email; answers its id, SES message id and contact. */
async function sentEmail(to: string) {
  smtp.received.length = 0;
  const res = await svc.api.post('/v1/send', { to, from: 'hi@ses.test', subject: 's', body: 'b', subscribed: true }, key);
  const id = res.body.data.emails[0].email;
  for (;;) {
    const [row] = await dbQuery(svc.databaseUrl, 'SELECT status, provider_message_id, message_id, contact_id FROM emails WHERE id = $1', [id]);
    if (row.status === 'SENT') return { id, ses: row.provider_message_id as string, messageId: row.message_id as string, contactId: row.contact_id as string };
    await new Promise((r) => setTimeout(r, 50));
  }
}

const email = async (id: string) => (await dbQuery(svc.databaseUrl, 'SELECT * FROM emails WHERE id = $1', [id]))[0];
const contact = async (id: string) => (await dbQuery(svc.databaseUrl, 'SELECT subscribed FROM contacts WHERE id = $1', [id]))[0];
const eventNames = async (contactId: string) =>
  (await dbQuery(svc.databaseUrl, 'SELECT name FROM events WHERE contact_id = $1 ORDER BY created_at, name', [contactId])).map((e) => e.name);

test('a signed Delivery notification finds the email by SES message id; a repeat is processed once', async () => {
  const e = await sentEmail('d@example.org');
  expect(e.ses).toMatch(/^0100018c/);
  const m = signed({ Type: 'Notification', Message: sesEvent('Delivery', e.ses) });
  const first = await post(m);
  expect(first.status).toBe(200);
  expect(first.body).toEqual({ result: 'recorded' });
  expect((await email(e.id)).status).toBe('DELIVERED');
  expect((await post(m)).body).toEqual({ result: 'duplicate' });
  expect((await eventNames(e.contactId)).filter((n) => n === 'email.delivery')).toHaveLength(1);
});

test('statuses never move down; a notification can also be matched by our Message-ID', async () => {
  const e = await sentEmail('order@example.org');
  const byHeader = (type: string, extra = {}) =>
    JSON.stringify({ notificationType: type, mail: { messageId: 'unknown-ses-id', commonHeaders: { messageId: e.messageId } }, ...extra });
  await post(signed({ Type: 'Notification', Message: byHeader('Click', { click: { link: 'https://x.example/' } }) }));
  await post(signed({ Type: 'Notification', Message: byHeader('Delivery') }, '1'));
  const row = await email(e.id);
  expect(row.status).toBe('CLICKED');
  expect(row.delivered_at).toBeTruthy();
});

test('a permanent bounce and a complaint unsubscribe the contact; a transient bounce is recorded only', async () => {
  const transient = await sentEmail('soft@example.org');
  await post(signed({ Type: 'Notification', Message: sesEvent('Bounce', transient.ses, { bounce: { bounceType: 'Transient' } }) }));
  expect((await email(transient.id)).status).toBe('SENT');
  expect((await email(transient.id)).bounced_at).toBeTruthy();
  expect((await contact(transient.contactId)).subscribed).toBe(true);
  expect(await eventNames(transient.contactId)).toContain('email.bounce');

  const hard = await sentEmail('hard@example.org');
  await post(signed({ Type: 'Notification', Message: sesEvent('Bounce', hard.ses, { bounce: { bounceType: 'Permanent' } }) }));
  expect((await email(hard.id)).status).toBe('BOUNCED');
  expect((await contact(hard.contactId)).subscribed).toBe(false);
  const [unsub] = await dbQuery(svc.databaseUrl, `SELECT data FROM events WHERE contact_id = $1 AND name = 'contact.unsubscribed'`, [hard.contactId]);
  expect(unsub.data).toEqual({ reason: 'bounce', emailId: hard.id });
  // The address is suppressed too, with the email that bounced: no later mail of any type goes to it.
  const listed = async (address: string) => (await svc.api.get(`/suppressions?email=${address}`, key)).body.data;
  expect(await listed('hard@example.org')).toEqual([
    expect.objectContaining({ reason: 'BOUNCE', emailId: hard.id, detail: expect.stringContaining('hard bounce') }),
  ]);
  expect(await listed('soft@example.org')).toEqual([]);

  const complained = await sentEmail('angry@example.org');
  await post(signed({ Type: 'Notification', Message: sesEvent('Complaint', complained.ses, { complaint: {} }) }));
  expect((await email(complained.id)).status).toBe('COMPLAINED');
  expect((await contact(complained.contactId)).subscribed).toBe(false);
  expect(await listed('angry@example.org')).toEqual([expect.objectContaining({ reason: 'COMPLAINT', emailId: complained.id })]);
});

test('forged, tampered or untrusted messages are refused with 403 and change nothing', async () => {
  const e = await sentEmail('forged@example.org');
  const good = signed({ Type: 'Notification', Message: sesEvent('Complaint', e.ses) });
  expect((await post({ ...good, Message: sesEvent('Complaint', 'another') })).status).toBe(403);
  expect((await post({ ...good, Signature: good.Signature.replace(/^.{4}/, 'AAAA') })).status).toBe(403);
  const elsewhere = signed({ Type: 'Notification', Message: sesEvent('Complaint', e.ses), SigningCertURL: 'https://evil.example/cert.pem' });
  expect((await post(elsewhere)).status).toBe(403);
  expect((await post({ hello: 'world' })).status).toBe(400);
  expect((await email(e.id)).status).toBe('SENT');
  expect((await contact(e.contactId)).subscribed).toBe(true);
});

test('a correctly signed message from a topic outside SNS_TOPIC_ARNS changes nothing and answers 200', async () => {
  const e = await sentEmail('other-topic@example.org');
  const foreign = 'arn:aws:sns:us-east-1:999999999999:someone-elses-topic';
  const complaint = signed({ Type: 'Notification', Message: sesEvent('Complaint', e.ses), TopicArn: foreign });
  const res = await post(complaint);
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ ignored: 'topic' });
  const confirm = signed({
    Type: 'SubscriptionConfirmation',
    Message: 'confirm',
    Token: 't3',
    SubscribeURL: `${sns.base}/confirm?token=t3`,
    TopicArn: foreign,
  });
  expect((await post(confirm)).body).toEqual({ ignored: 'topic' });
  expect(sns.confirmations).not.toContain('/confirm?token=t3');
  expect((await email(e.id)).status).toBe('SENT');
  expect((await contact(e.contactId)).subscribed).toBe(true);
  // The same complaint from the operator's topic is recorded.
  expect((await post(signed({ Type: 'Notification', Message: sesEvent('Complaint', e.ses) }))).body).toEqual({ result: 'recorded' });
});

test('subscription confirmations are followed only for trusted hosts', async () => {
  const ok = signed({ Type: 'SubscriptionConfirmation', Message: 'confirm', Token: 't1', SubscribeURL: `${sns.base}/confirm?token=t1` });
  expect((await post(ok)).body).toEqual({ confirmed: true });
  expect(sns.confirmations).toEqual(['/confirm?token=t1']);
  const untrusted = signed({ Type: 'SubscriptionConfirmation', Message: 'confirm', Token: 't2', SubscribeURL: 'https://evil.example/confirm?token=t2' });
  expect((await post(untrusted)).status).toBe(403);
  expect(sns.confirmations).toHaveLength(1);
});

test('a signed notification that cannot be processed still answers 200', async () => {
  expect((await post(signed({ Type: 'Notification', Message: 'not json' }))).body).toEqual({ result: 'error' });
  expect((await post(signed({ Type: 'Notification', Message: sesEvent('Delivery', 'nobody-knows') }))).body).toEqual({ result: 'unknown_email' });
});

test('GET /campaigns/:id/stats counts what the provider reports for a campaign: deliveries, clicks (each also an open) and bounces', async () => {
  const owner = await createAccount(svc.api, 'Stats');
  const k = { key: owner.project.secretKey };
  await verifiedDomain(svc.api, dns, owner.project.secretKey, 'stats.ses.test');
  for (const to of ['c1@example.org', 'c2@example.org', 'c3@example.org']) await svc.api.post('/contacts', { email: to }, k);
  const c = (await svc.api.post('/campaigns', { name: 'Stats', subject: 'News', body: '<p>news</p>', from: 'news@stats.ses.test', audienceType: 'ALL' }, k))
    .body.data;
  await svc.api.post(`/campaigns/${c.id}/send`, {}, k);
  const sent = await until(async () => {
    const rows = await dbQuery(svc.databaseUrl, `SELECT provider_message_id AS ses FROM emails WHERE campaign_id = $1 AND status = 'SENT' ORDER BY to_email`, [
      c.id,
    ]);
    return rows.length === 3 ? rows.map((r) => r.ses as string) : undefined;
  });
  await post(signed({ Type: 'Notification', Message: sesEvent('Delivery', sent[0]) }));
  await post(signed({ Type: 'Notification', Message: sesEvent('Click', sent[1], { click: { link: 'https://stats.ses.test/offer' } }) }));
  await post(signed({ Type: 'Notification', Message: sesEvent('Bounce', sent[2], { bounce: { bounceType: 'Permanent' } }) }));

  const stats = await svc.api.get(`/campaigns/${c.id}/stats`, k);
  expect(stats.status).toBe(200);
  expect(stats.body).toMatchObject({
    campaignId: c.id,
    totalRecipients: 3,
    sent: 3,
    delivered: 1,
    opened: 1,
    clicked: 1,
    bounced: 1,
    openRate: 33.33,
    clickRate: 33.33,
    bounceRate: 33.33,
  });
  const campaign = (await svc.api.get(`/campaigns/${c.id}`, k)).body;
  expect(campaign).toMatchObject({ sentCount: 3, deliveredCount: 1, openedCount: 1, clickedCount: 1, bouncedCount: 1 });
});
