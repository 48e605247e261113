/**
 * Webhooks out, as a user's receiver sees them: real HTTP receivers on loopback, every message
 * verified with the `standardwebhooks` package, retries, rotation, 410, and a restart between attempts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  json: { type: string; timestamp: string; data: Record<string, any> };
}

/** A receiver on loopback: records every request; `answer` decides each status (200 by default). */
class Receiver {
  readonly received: Received[] = [];
  answer: (r: Received) => number = () => 200;
  private server?: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        const r = { path: req.url ?? '', headers: req.headers as Record<string, string>, body, json: JSON.parse(body) };
        this.received.push(r);
        res.statusCode = this.answer(r);
        res.end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    return this;
  }

  url(path: string): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}${path}`;
  }

  at(path: string): Received[] {
    return this.received.filter((r) => r.path === path);
  }

  async stop(): Promise<void> {
    await new Promise((resolve) => this.server!.close(resolve));
  }
}

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let receiver: Receiver;
let svc: TestService;
let acct: Account;
let key: { key: string };
const env = () => ({
  DNS_SERVERS: dns.address,
  SMTP_URL: smtp.url,
  WEBHOOK_ALLOW_PRIVATE: 'true',
  WEBHOOK_RETRY_BASE_SECONDS: '0.3',
  DISPATCH_IDLE_SECONDS: '1',
});

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  receiver = await new Receiver().start();
  svc = await startTestService(env());
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'hooks.test');
});

afterAll(async () => {
  await svc.stop();
  await receiver.stop();
  await smtp.stop();
  await dns.stop();
});

const addEndpoint = async (path: string, extra: Record<string, unknown> = {}) => {
  const res = await svc.api.post('/webhook-endpoints', { url: receiver.url(path), ...extra }, key);
  expect(res.status).toBe(201);
  return res.body as { id: string; secret: string };
};

const verified = (secret: string, r: Received) => new Webhook(secret).verify(r.body, r.headers) as Received['json'];

const deliveries = async (endpointId: string, status?: string) =>
  (await svc.api.get(`/webhook-endpoints/${endpointId}/deliveries${status ? `?status=${status}` : ''}`, key)).body;

test('endpoints: created with a whsec_ secret shown once, listed, changed, removed; a non-http URL is 422', async () => {
  const created = await addEndpoint('/crud', { events: ['email.*'], description: 'bounces' });
  expect(created).toMatchObject({ url: receiver.url('/crud'), events: ['email.*'], description: 'bounces', enabled: true, disabledReason: null });
  expect(Buffer.from(created.secret.replace(/^whsec_/, ''), 'base64')).toHaveLength(32);
  const got = await svc.api.get(`/webhook-endpoints/${created.id}`, key);
  expect(got.body.secret).toBeUndefined();
  expect((await svc.api.get('/webhook-endpoints', key)).body.map((e: { id: string }) => e.id)).toContain(created.id);
  const patched = await svc.api.patch(`/webhook-endpoints/${created.id}`, { events: null, enabled: false }, key);
  expect(patched.body).toMatchObject({ events: null, enabled: false });
  expect((await svc.api.post('/webhook-endpoints', { url: 'ftp://files.example.com/in' }, key)).status).toBe(422);
  expect((await svc.api.post('/webhook-endpoints', { url: 'https://x.example.com', events: ['bad pattern*'] }, key)).status).toBe(422);
  expect((await svc.api.post('/webhook-endpoints', { url: 'https://x.example.com', events: ['*'] }, key)).status).toBe(422);
  expect((await svc.api.delete(`/webhook-endpoints/${created.id}`, key)).status).toBe(200);
  expect((await svc.api.get(`/webhook-endpoints/${created.id}`, key)).status).toBe(404);
  const stranger = await createAccount(svc.api, 'Stranger');
  expect((await svc.api.get(`/webhook-endpoints/${created.id}`, { key: stranger.project.secretKey })).status).toBe(404);
});

test('every event family reaches the endpoints subscribed to it, signed, with emailId and the contact', async () => {
  const all = await addEndpoint('/all');
  const email = await addEndpoint('/email', { events: ['email.*'] });
  const custom = await addEndpoint('/custom', { events: ['signed-up', 'contact.unsubscribed'] });
  const segments = await addEndpoint('/segments', { events: ['segment.*'] });

  const track = await svc.api.post('/v1/track', { email: 'fan@hooks.test', event: 'signed-up', data: { plan: 'pro' } }, { key: acct.project.publicKey });
  expect(track.status).toBe(200);
  const sent = await svc.api.post('/v1/send', { to: 'fan@hooks.test', from: 'hello@hooks.test', subject: 'Hi', body: '<p>Hi</p>' }, key);
  expect(sent.status).toBe(200);
  const emailId = sent.body.data.emails[0].email;
  const contact = sent.body.data.emails[0].contact;
  expect((await svc.api.patch(`/contacts/${contact.id}`, { subscribed: false }, key)).status).toBe(200);
  const segment = (await svc.api.post('/segments', { name: 'Fans', type: 'STATIC', trackMembership: true }, key)).body;
  await svc.api.post(`/segments/${segment.id}/members`, { emails: ['fan@hooks.test'] }, key);
  await svc.api.request('DELETE', `/segments/${segment.id}/members`, { key: key.key, body: { emails: ['fan@hooks.test'] } });

  const types = (path: string) =>
    receiver
      .at(path)
      .map((r) => r.json.type)
      .sort();
  await until(
    async () =>
      (receiver.at('/all').length >= 5 && receiver.at('/email').length >= 1 && receiver.at('/custom').length >= 2 && receiver.at('/segments').length >= 2) ||
      undefined,
    20_000,
    'the deliveries',
  );
  expect(types('/all')).toEqual(expect.arrayContaining(['contact.unsubscribed', 'email.sent', 'segment.fans.entry', 'segment.fans.exit', 'signed-up']));
  expect(types('/email')).toEqual(['email.sent']);
  expect(types('/custom')).toEqual(['contact.unsubscribed', 'signed-up']);
  expect(types('/segments')).toEqual(['segment.fans.entry', 'segment.fans.exit']);
  expect(verified(segments.secret, receiver.at('/segments')[0]).data.contact).toEqual({ id: contact.id, email: 'fan@hooks.test' });

  const sentMessage = receiver.at('/email')[0];
  expect(verified(email.secret, sentMessage)).toMatchObject({ type: 'email.sent', data: { emailId, contact: { id: contact.id, email: 'fan@hooks.test' } } });
  expect(sentMessage.headers['content-type']).toBe('application/json');
  expect(Math.abs(Number(sentMessage.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
  const tracked = receiver.at('/custom').find((r) => r.json.type === 'signed-up')!;
  expect(verified(custom.secret, tracked).data).toMatchObject({ plan: 'pro', contact: { email: 'fan@hooks.test' } });
  for (const r of receiver.at('/all')) verified(all.secret, r);
  // Another endpoint's secret does not verify.
  expect(() => verified(all.secret, sentMessage)).toThrow();
  expect((await deliveries(email.id)).data).toEqual([
    expect.objectContaining({ eventType: 'email.sent', status: 'SUCCEEDED', attempts: 1, lastStatusCode: 200 }),
  ]);
  for (const e of [all, email, custom, segments]) await svc.api.delete(`/webhook-endpoints/${e.id}`, key);
});

test('a receiver answering 500 twice then 200 gets the same webhook-id three times; the delivery ends SUCCEEDED after 3 attempts', async () => {
  const flaky = await addEndpoint('/flaky', { events: ['webhook.test'] });
  let calls = 0;
  receiver.answer = (r) => (r.path === '/flaky' && ++calls <= 2 ? 500 : 200);
  try {
    const queued = await svc.api.post(`/webhook-endpoints/${flaky.id}/test`, {}, key);
    expect(queued.body).toMatchObject({ eventType: 'webhook.test', status: 'PENDING' });
    await until(async () => ((await deliveries(flaky.id, 'SUCCEEDED')).data.length ? true : undefined), 20_000, 'success');
    const got = receiver.at('/flaky');
    expect(got).toHaveLength(3);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([queued.body.id]));
    for (const r of got) expect(verified(flaky.secret, r).type).toBe('webhook.test');
    expect((await deliveries(flaky.id)).data[0]).toMatchObject({ status: 'SUCCEEDED', attempts: 3, lastStatusCode: 200, lastError: null, nextAttemptAt: null });
  } finally {
    receiver.answer = () => 200;
  }
});

test('after a rotation both secrets sign for a day; a retry by hand resends a failed delivery', async () => {
  const endpoint = await addEndpoint('/rotating');
  const rotated = (await svc.api.post(`/webhook-endpoints/${endpoint.id}/rotate-secret`, {}, key)).body;
  expect(rotated.secret).not.toBe(endpoint.secret);
  await svc.api.post(`/webhook-endpoints/${endpoint.id}/test`, {}, key);
  const r = await until(async () => receiver.at('/rotating')[0], 20_000, 'the test message');
  expect(r.headers['webhook-signature'].split(' ')).toHaveLength(2);
  expect(verified(endpoint.secret, r).type).toBe('webhook.test');
  expect(verified(rotated.secret, r).type).toBe('webhook.test');

  // 410 Gone: the delivery FAILED at once and the endpoint disabled, saying why.
  receiver.answer = (x) => (x.path === '/rotating' ? 410 : 200);
  try {
    const gone = (await svc.api.post(`/webhook-endpoints/${endpoint.id}/test`, {}, key)).body;
    await until(async () => ((await deliveries(endpoint.id, 'FAILED')).data.length ? true : undefined), 20_000, 'the failure');
    expect((await deliveries(endpoint.id, 'FAILED')).data[0]).toMatchObject({ id: gone.id, attempts: 1, lastStatusCode: 410 });
    expect((await svc.api.get(`/webhook-endpoints/${endpoint.id}`, key)).body).toMatchObject({
      enabled: false,
      disabledReason: expect.stringContaining('410'),
    });
    receiver.answer = () => 200;
    expect((await svc.api.patch(`/webhook-endpoints/${endpoint.id}`, { enabled: true }, key)).body).toMatchObject({ enabled: true, disabledReason: null });
    expect((await svc.api.post(`/webhook-endpoints/${endpoint.id}/deliveries/${gone.id}/retry`, {}, key)).body).toMatchObject({
      status: 'PENDING',
      attempts: 0,
    });
    // Retry makes it PENDING at once: wait for the resend's own outcome, not for FAILED to be gone.
    await until(
      async () => ((await deliveries(endpoint.id, 'SUCCEEDED')).data.some((d: { id: string }) => d.id === gone.id) ? true : undefined),
      20_000,
      'the resend',
    );
    expect(receiver.at('/rotating').filter((x) => x.headers['webhook-id'] === gone.id)).toHaveLength(2);
    expect((await svc.api.post(`/webhook-endpoints/${endpoint.id}/deliveries/${gone.id}/retry`, {}, key)).status).toBe(400);
  } finally {
    receiver.answer = () => 200;
  }
});

test('a restart of the service between two attempts loses nothing', async () => {
  const endpoint = await addEndpoint('/restart', { events: ['webhook.test'] });
  let down = true;
  receiver.answer = (r) => (r.path === '/restart' && down ? 503 : 200);
  try {
    const queued = (await svc.api.post(`/webhook-endpoints/${endpoint.id}/test`, {}, key)).body;
    await until(async () => receiver.at('/restart')[0], 20_000, 'the first attempt');
    await svc.stop();
    const beforeRestart = receiver.at('/restart').length;
    down = false;
    svc = await startTestService({ ...env(), DATABASE_URL: svc.databaseUrl });
    await until(async () => ((await deliveries(endpoint.id, 'SUCCEEDED')).data.length ? true : undefined), 30_000, 'the retry after the restart');
    const got = receiver.at('/restart');
    // Every attempt, before and after the restart, carried the one delivery id, and each was counted.
    expect(got.length).toBeGreaterThan(beforeRestart);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([queued.id]));
    expect((await deliveries(endpoint.id)).data[0]).toMatchObject({ status: 'SUCCEEDED', attempts: got.length });
  } finally {
    receiver.answer = () => 200;
  }
});

test('without WEBHOOK_ALLOW_PRIVATE: an address written as private is 422 when saved; a name leading there fails with a reason that maps nothing', async () => {
  const strict = await startTestService({ ...env(), WEBHOOK_ALLOW_PRIVATE: 'false' });
  try {
    const owner = await createAccount(strict.api, 'Strict');
    const k = { key: owner.project.secretKey };
    for (const url of [
      receiver.url('/in'),
      'http://[::1]/in',
      'http://localhost:8080/in',
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.1/in',
      'http://2130706433/in',
    ]) {
      const refused = await strict.api.post('/webhook-endpoints', { url }, k);
      expect(refused.status).toBe(422);
      expect(refused.body.error.errors[0]).toMatchObject({ field: 'url', message: expect.stringMatching(/not lead to a public address/) });
    }
    const created = await strict.api.post('/webhook-endpoints', { url: 'http://internal.hooks.test/in' }, k);
    expect(created.status).toBe(201);
    expect((await strict.api.patch(`/webhook-endpoints/${created.body.id}`, { url: 'http://192.168.1.10/in' }, k)).status).toBe(422);

    // The name resolves to a private address: each delivery fails, and its log says why without saying where.
    dns.set('internal.hooks.test', { A: ['10.0.0.1'] });
    await strict.api.post(`/webhook-endpoints/${created.body.id}/test`, undefined, k);
    const failed = await until(
      async () => {
        const list = (await strict.api.get(`/webhook-endpoints/${created.body.id}/deliveries`, k)).body;
        return list.data.find((d: { lastError: string | null }) => d.lastError);
      },
      20_000,
      'the failed delivery',
    );
    expect(failed.lastError).toMatch(/^the URL does not lead to a public address/);
    expect(failed.lastError).not.toMatch(/10\.0\.0\.1|internal/);

    // A WEBHOOK step too, when added and when changed.
    const flow = (await strict.api.post('/workflows', { name: 'Private', eventName: 'x' }, k)).body;
    const step = await strict.api.post(`/workflows/${flow.id}/steps`, { type: 'WEBHOOK', name: 'h', config: { url: 'http://127.0.0.1:9/x' } }, k);
    expect(step.status).toBe(422);
    expect(step.body.error.errors[0].field).toBe('config.url');
    const ok = await strict.api.post(`/workflows/${flow.id}/steps`, { type: 'WEBHOOK', name: 'h', config: { url: 'https://hooks.example.com/{{id}}' } }, k);
    expect(ok.status).toBe(201);
    expect((await strict.api.patch(`/workflows/${flow.id}/steps/${ok.body.id}`, { config: { url: 'http://[fd00::1]/x' } }, k)).status).toBe(422);
  } finally {
    await strict.stop();
  }
});
