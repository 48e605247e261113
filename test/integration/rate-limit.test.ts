import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';

/** A window straddling a minute boundary would reset the count mid-test; wait it out. */
async function awayFromMinuteBoundary(): Promise<void> {
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 50_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 200));
}

describe('per-project limit', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService({ RATE_LIMIT_PER_MINUTE: '5' });
  });
  afterAll(() => svc.stop());

  test('the 6th request in a minute is 429 with Retry-After and RateLimit headers; other projects are unaffected', async () => {
    const a = await createAccount(svc.api);
    const b = await createAccount(svc.api);
    await awayFromMinuteBoundary();
    const key = { key: a.project.secretKey };
    for (let i = 0; i < 5; i++) {
      const res = await svc.api.get('/contacts', key);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBe('5');
      expect(res.headers.get('ratelimit-remaining')).toBe(String(4 - i));
    }
    const limited = await svc.api.get('/contacts', key);
    expect(limited.status).toBe(429);
    expect(limited.body.error).toMatchObject({ code: 'RATE_LIMIT_EXCEEDED', statusCode: 429 });
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(limited.headers.get('ratelimit-limit')).toBe('5');
    expect(limited.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(limited.headers.get('ratelimit-reset'))).toBe(retryAfter);
    // The public key has a budget of its own: the secret key's being used up does not refuse it.
    expect((await svc.api.post('/v1/track', { email: 'x@y.co', event: 'e' }, { key: a.project.publicKey })).status).toBe(200);
    expect((await svc.api.get('/contacts', { key: b.project.secretKey })).status).toBe(200);
  });
});

test('two API processes on one database together admit only the limit', async () => {
  const first = await startTestService({ RATE_LIMIT_PER_MINUTE: '30' }, 'api');
  const second = await startTestService({ RATE_LIMIT_PER_MINUTE: '30', DATABASE_URL: first.databaseUrl }, 'api');
  try {
    const acct = await createAccount(first.api);
    await awayFromMinuteBoundary();
    const key = { key: acct.project.secretKey };
    const results = await Promise.all(Array.from({ length: 80 }, (_, i) => (i % 2 ? first : second).api.get('/contacts?limit=1', key)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(30);
    expect(statuses.filter((s) => s === 429)).toHaveLength(50);
  } finally {
    await second.stop();
    await first.stop();
  }
});

describe('the public key’s own budget', () => {
  let dns: ZoneDnsServer;
  let svc: TestService;
  beforeAll(async () => {
    dns = await new ZoneDnsServer().start();
    svc = await startTestService({
      DNS_SERVERS: dns.address,
      TRUST_PROXY: 'true',
      RATE_LIMIT_PER_MINUTE: '30',
      PUBLIC_RATE_LIMIT_PER_MINUTE: '30',
      PUBLIC_RATE_LIMIT_PER_CLIENT_PER_MINUTE: '10',
    });
  });
  afterAll(async () => {
    await svc.stop();
    await dns.stop();
  });

  test('a flood of bad posts with the public key leaves /v1/send with the secret key answering; each client has its share', async () => {
    const acct = await createAccount(svc.api);
    await awayFromMinuteBoundary();
    await verifiedDomain(svc.api, dns, acct.project.secretKey, 'flooded.test');
    const post = (ip: string) =>
      svc.api.post('/v1/subscribe', { email: 'not an address' }, { key: acct.project.publicKey, headers: { 'x-forwarded-for': ip } });
    // One client: its first 10 are answered (422, a bad address), the rest refused for that client.
    const one = (await Promise.all(Array.from({ length: 40 }, () => post('203.0.113.7')))).map((r) => r.status);
    expect(one.filter((s) => s === 422)).toHaveLength(10);
    expect(one.filter((s) => s === 429)).toHaveLength(30);
    // Clients of one IPv6 /64 are one client.
    const v6 = (await Promise.all(Array.from({ length: 12 }, (_, i) => post(`2001:db8:1:2::${i + 1}`)))).map((r) => r.status);
    expect(v6.filter((s) => s === 429)).toHaveLength(2);
    // Many clients: the public key's own budget (30) is used up.
    const many = (await Promise.all(Array.from({ length: 40 }, (_, i) => post(`198.51.100.${i + 1}`)))).map((r) => r.status);
    expect(many.filter((s) => s === 422)).toHaveLength(10);

    const sent = await svc.api.post(
      '/v1/send',
      { to: 'reader@example.org', from: 'hi@flooded.test', subject: 'Hi', body: '<p>Hi</p>' },
      { key: acct.project.secretKey },
    );
    expect(sent.status).toBe(200);
    // Its budget holds only its own requests (the domain's two, and this one).
    expect(sent.headers.get('ratelimit-remaining')).toBe('27');
  });
});
