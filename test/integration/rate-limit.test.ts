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
    // The public key shares the project's budget.
    expect((await svc.api.post('/v1/track', { email: 'x@y.co', event: 'e' }, { key: a.project.publicKey })).status).toBe(429);
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
