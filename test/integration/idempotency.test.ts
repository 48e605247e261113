import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { purgeExpiredIdempotencyKeys } from '../../src/db/idempotency-keys';

let svc: TestService;
let acct: Account;
beforeAll(async () => {
  // About 1.8 s, so expiry can be observed.
  svc = await startTestService({ IDEMPOTENCY_TTL_HOURS: '0.0005' });
  acct = await createAccount(svc.api);
});
afterAll(() => svc.stop());

const track = (key: string, body: unknown = { email: 'idem@example.com', event: 'paid' }, project = acct.project) =>
  svc.api.post('/v1/track', body, { key: project.publicKey, headers: { 'Idempotency-Key': key } });

test('20 concurrent requests with one key: exactly one runs, 19 get 409 IDEMPOTENCY_KEY_REUSED with details', async () => {
  const results = await Promise.all(Array.from({ length: 20 }, () => track('order-1')));
  const ok = results.filter((r) => r.status === 200);
  const refused = results.filter((r) => r.status === 409);
  expect(ok).toHaveLength(1);
  expect(refused).toHaveLength(19);
  for (const r of refused) {
    expect(r.body.error).toMatchObject({
      code: 'IDEMPOTENCY_KEY_REUSED',
      statusCode: 409,
      details: { key: 'order-1', originalRequest: 'POST /v1/track', originalRequestAt: expect.any(String) },
    });
    expect([null, 200]).toContain(r.body.error.details.originalStatusCode);
  }
  const events = await dbQuery(svc.databaseUrl, `SELECT 1 FROM events WHERE name = 'paid'`);
  expect(events).toHaveLength(1);

  const later = await track('order-1');
  expect(later.status).toBe(409);
  expect(later.body.error.details.originalStatusCode).toBe(200);
});

test('a 4xx outcome releases the key', async () => {
  const bad = await track('order-2', { email: 'not-an-email', event: 'paid2' });
  expect(bad.status).toBe(422);
  const good = await track('order-2', { email: 'ok@example.com', event: 'paid2' });
  expect(good.status).toBe(200);
});

test('keys are scoped to the project', async () => {
  const other = await createAccount(svc.api, 'Other');
  expect((await track('shared-key')).status).toBe(200);
  expect((await track('shared-key', undefined, other.project)).status).toBe(200);
});

test('an invalid key is 400', async () => {
  const tooLong = await track('k'.repeat(256));
  expect(tooLong.status).toBe(400);
  expect(tooLong.body.error.code).toBe('INVALID_IDEMPOTENCY_KEY');
  const nonAscii = await track('clé');
  expect(nonAscii.status).toBe(400);
  expect((await track('k'.repeat(255))).status).toBe(200);
});

test('an expired key can be used again, and expired keys are purged', async () => {
  expect((await track('order-3')).status).toBe(200);
  expect((await track('order-3')).status).toBe(409);
  await new Promise((r) => setTimeout(r, 2000));
  expect((await track('order-3')).status).toBe(200);

  await track('order-4');
  await new Promise((r) => setTimeout(r, 2000));
  const purged = await purgeExpiredIdempotencyKeys(svc.orm.em.fork(), 0.0005);
  expect(purged).toBeGreaterThanOrEqual(1);
  const left = await dbQuery(svc.databaseUrl, `SELECT key FROM idempotency_keys WHERE key = 'order-4'`);
  expect(left).toHaveLength(0);
});

test('a key whose request died with its process (claimed, no outcome) is 409 with Retry-After, and taken over after a minute', async () => {
  const day = await startTestService();
  try {
    const { project } = await createAccount(day.api);
    const send = (key: string) =>
      day.api.post('/v1/track', { email: 'cut@example.com', event: 'paid' }, { key: project.publicKey, headers: { 'Idempotency-Key': key } });
    // What a kill -9 in the middle of a request leaves: the claim, and nothing else.
    const claim = (key: string, age: string) =>
      dbQuery(day.databaseUrl, `INSERT INTO idempotency_keys (project_id, key, request, created_at) VALUES ($1, $2, 'POST /v1/track', now() - $3::interval)`, [
        project.id,
        key,
        age,
      ]);
    await claim('cut-fresh', '5 seconds');
    const inFlight = await send('cut-fresh');
    expect(inFlight.status).toBe(409);
    expect(inFlight.body.error.details).toMatchObject({ key: 'cut-fresh', originalStatusCode: null });
    expect(Number(inFlight.headers.get('retry-after'))).toBeGreaterThanOrEqual(50);
    expect(Number(inFlight.headers.get('retry-after'))).toBeLessThanOrEqual(56);

    await claim('cut-old', '61 seconds');
    expect((await send('cut-old')).status).toBe(200);
    expect(await dbQuery(day.databaseUrl, `SELECT status_code FROM idempotency_keys WHERE key = 'cut-old'`)).toEqual([{ status_code: 200 }]);
    // A finished request's key is not taken over (within its 24 hours).
    await dbQuery(day.databaseUrl, `UPDATE idempotency_keys SET created_at = now() - interval '2 hours' WHERE key = 'cut-old'`);
    const reused = await send('cut-old');
    expect(reused.status).toBe(409);
    expect(reused.headers.get('retry-after')).toBeNull();
  } finally {
    await day.stop();
  }
});
