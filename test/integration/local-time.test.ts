import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

/**
 * Local-time campaigns end to end: the real service, its Temporal dev server and an SMTP capture, with
 * contacts in three zones: one whose moment is a minute or two away, one already past, one hours away.
 */

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url });
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
});

async function setup(name: string) {
  const acct = await createAccount(svc.api, name);
  const key = { key: acct.project.secretKey };
  const domain = `${name.toLowerCase().replace(/\W/g, '')}.test`;
  await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  return { acct, key, domain, from: `news@${domain}` };
}

const base = (from: string) => ({ name: 'Morning', subject: 'Good morning', body: '<p>Hello</p>', from, audienceType: 'ALL' });

test('validation: HH:MM, a date, an IANA zone, a policy; localTime with scheduledFor, or with abTest, is 422', async () => {
  const { key, from } = await setup('LocalRules');
  await svc.api.post('/contacts', { email: 'x@rules.test' }, key);
  const ok = { at: '09:00', date: '2030-06-01', defaultTimezone: 'Europe/Paris', pastPolicy: 'next_day' };
  for (const localTime of [
    { ...ok, at: '9:00' },
    { ...ok, at: '24:00' },
    { ...ok, date: '2030-02-30' },
    { ...ok, defaultTimezone: 'Mars/Olympus' },
    { ...ok, defaultTimezone: '+05:00' },
    { ...ok, pastPolicy: 'later' },
  ]) {
    const res = await svc.api.post('/campaigns', { ...base(from), localTime }, key);
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toMatch(/^localTime\./);
  }
  const c = (await svc.api.post('/campaigns', { ...base(from), localTime: ok }, key)).body.data;
  expect(c.localTime).toEqual(ok);
  const scheduled = await svc.api.post(`/campaigns/${c.id}/send`, { scheduledFor: new Date(Date.now() + 86_400_000).toISOString() }, key);
  expect(scheduled.status).toBe(422);
  expect(scheduled.body.error.errors[0].field).toBe('scheduledFor');
  expect((await svc.api.get(`/campaigns/${c.id}`, key)).body.status).toBe('DRAFT');
  const plain = (await svc.api.post('/campaigns', base(from), key)).body.data;
  await svc.api.post(`/campaigns/${plain.id}/send`, { scheduledFor: new Date(Date.now() + 86_400_000).toISOString() }, key);
  const put = await svc.api.put(`/campaigns/${plain.id}`, { ...base(from), localTime: ok }, key);
  expect(put.status).toBe(422);
  expect(put.body.error.errors[0].field).toBe('localTime');
  await svc.api.post(`/campaigns/${plain.id}/cancel`, {}, key);
});

test('three zones: a minute away is delivered then, a past one follows each policy, hours away waits and is listed', async () => {
  const { key, domain, from, acct } = await setup('LocalZones');
  // The moment in UTC: one to two minutes from now, to the minute.
  const target = new Date(Math.floor((Date.now() + 120_000) / 60_000) * 60_000);
  const date = target.toISOString().slice(0, 10);
  const at = target.toISOString().slice(11, 16);
  // No valid zone of its own: the default (UTC). Etc/GMT-1 is UTC+1 (its moment passed an hour ago), Etc/GMT+5 is UTC-5.
  await svc.api.post('/contacts', { email: `soon@${domain}`, data: { timezone: 'Mars/Olympus' } }, key);
  await svc.api.post('/contacts', { email: `past@${domain}`, data: { timezone: 'Etc/GMT-1' } }, key);
  await svc.api.post('/contacts', { email: `later@${domain}`, data: { timezone: 'Etc/GMT+5' } }, key);
  const HOUR = 3_600_000;
  const campaigns: Record<string, string> = {};
  for (const pastPolicy of ['send_now', 'skip', 'next_day']) {
    const localTime = { at, date, defaultTimezone: 'UTC', pastPolicy };
    const c = (await svc.api.post('/campaigns', { ...base(from), name: pastPolicy, subject: pastPolicy, localTime }, key)).body.data;
    expect((await svc.api.post(`/campaigns/${c.id}/send`, {}, key)).status).toBe(200);
    campaigns[pastPolicy] = c.id;
  }
  const get = async (policy: string) => (await svc.api.get(`/campaigns/${campaigns[policy]}`, key)).body;
  const received = (to: string) => smtp.received.filter((m) => m.envelope.to[0] === `${to}@${domain}`).map((m) => m.parsed.subject);

  // send_now: the past zone at once. skip and next_day: nothing now.
  await smtp.waitFor(1);
  expect(received('past')).toEqual(['send_now']);
  const zone = (timezone: string, sendAt: Date) => ({ timezone, sendAt: sendAt.toISOString(), recipients: 1 });
  expect((await get('send_now')).localTime.waiting).toEqual([zone('UTC', target), zone('Etc/GMT+5', new Date(target.getTime() + 5 * HOUR))]);
  expect((await get('skip')).localTime.waiting).toEqual([zone('UTC', target), zone('Etc/GMT+5', new Date(target.getTime() + 5 * HOUR))]);
  expect((await get('next_day')).localTime.waiting).toEqual([
    zone('UTC', target),
    zone('Etc/GMT+5', new Date(target.getTime() + 5 * HOUR)),
    zone('Etc/GMT-1', new Date(target.getTime() + 23 * HOUR)),
  ]);
  expect(received('soon')).toEqual([]);
  const [skipped] = await dbQuery(svc.databaseUrl, `SELECT status, last_error FROM emails WHERE campaign_id = $1 AND to_email = $2`, [
    campaigns.skip,
    `past@${domain}`,
  ]);
  expect(skipped).toEqual({ status: 'CANCELLED', last_error: 'its local time had passed when sending started' });

  // The UTC zone's moment comes: its recipient gets all three, not before it.
  await until(async () => (received('soon').length === 3 ? true : undefined), 180_000, 'the UTC zone');
  const sentAt = await dbQuery(svc.databaseUrl, `SELECT sent_at FROM emails WHERE project_id = $1 AND to_email = $2`, [acct.project.id, `soon@${domain}`]);
  for (const r of sentAt) expect(new Date(r.sent_at).getTime()).toBeGreaterThanOrEqual(target.getTime());
  expect(received('later')).toEqual([]);
  expect(received('past')).toEqual(['send_now']);
  for (const policy of ['send_now', 'skip']) {
    const c = await get(policy);
    expect(c.status).toBe('SENDING');
    expect(c.localTime.waiting).toEqual([zone('Etc/GMT+5', new Date(target.getTime() + 5 * HOUR))]);
  }
  expect((await get('next_day')).localTime.waiting.map((z: { timezone: string }) => z.timezone)).toEqual(['Etc/GMT+5', 'Etc/GMT-1']);
  for (const id of Object.values(campaigns)) expect((await svc.api.post(`/campaigns/${id}/cancel`, {}, key)).status).toBe(200);
  expect(received('later')).toEqual([]);
}, 240_000);
