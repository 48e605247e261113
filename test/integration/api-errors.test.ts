import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
let acct: Account;
beforeAll(async () => {
  svc = await startTestService();
  acct = await createAccount(svc.api);
});
afterAll(() => svc.stop());

function expectEnvelope(res: { status: number; body: any; headers: Headers }, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({
    success: false,
    error: expect.objectContaining({ code, message: expect.any(String), statusCode: status, requestId: expect.any(String) }),
    timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
  });
  expect(res.headers.get('x-request-id')).toBe(res.body.error.requestId);
}

describe('API keys', () => {
  test('a missing key is 401', async () => {
    expectEnvelope(await svc.api.get('/contacts'), 401, 'UNAUTHORIZED');
    expectEnvelope(await svc.api.post('/v1/track', { email: 'a@b.co', event: 'x' }), 401, 'UNAUTHORIZED');
  });

  test('an unknown key is 401 INVALID_API_KEY', async () => {
    expectEnvelope(await svc.api.get('/contacts', { key: 'sk_' + '0'.repeat(48) }), 401, 'INVALID_API_KEY');
    expectEnvelope(await svc.api.get('/contacts', { key: 'garbage' }), 401, 'INVALID_API_KEY');
  });

  test('the public key works only on /v1/track; the secret key everywhere else', async () => {
    expectEnvelope(await svc.api.get('/contacts', { key: acct.project.publicKey }), 401, 'INVALID_API_KEY');
    expectEnvelope(await svc.api.post('/events/track', { email: 'a@b.co', event: 'x' }, { key: acct.project.publicKey }), 401, 'INVALID_API_KEY');
    expectEnvelope(await svc.api.post('/v1/track', { email: 'a@b.co', event: 'x' }, { key: acct.project.secretKey }), 401, 'INVALID_API_KEY');
    expect((await svc.api.post('/v1/track', { email: 'a@b.co', event: 'x' }, { key: acct.project.publicKey })).status).toBe(200);
    expect((await svc.api.post('/events/track', { email: 'a@b.co', event: 'x' }, { key: acct.project.secretKey })).status).toBe(200);
  });

  test('a disabled project is 403 on every API-key endpoint', async () => {
    const other = await createAccount(svc.api, 'Disabled');
    await dbQuery(svc.databaseUrl, `UPDATE projects SET disabled = true, disabled_reason = 'abuse' WHERE id = $1`, [other.project.id]);
    expectEnvelope(await svc.api.get('/contacts', { key: other.project.secretKey }), 403, 'PROJECT_DISABLED');
    expectEnvelope(await svc.api.post('/v1/track', { email: 'a@b.co', event: 'x' }, { key: other.project.publicKey }), 403, 'PROJECT_DISABLED');
  });

  test("another project's ids are 404, never visible", async () => {
    const mine = await svc.api.post('/contacts', { email: 'mine@example.com' }, { key: acct.project.secretKey });
    const other = await createAccount(svc.api, 'Other');
    const key = { key: other.project.secretKey };
    expectEnvelope(await svc.api.get(`/contacts/${mine.body.id}`, key), 404, 'NOT_FOUND');
    expectEnvelope(await svc.api.patch(`/contacts/${mine.body.id}`, { subscribed: false }, key), 404, 'NOT_FOUND');
    expectEnvelope(await svc.api.delete(`/contacts/${mine.body.id}`, key), 404, 'NOT_FOUND');
    expectEnvelope(await svc.api.get(`/events/contact/${mine.body.id}`, key), 404, 'NOT_FOUND');
    const list = await svc.api.get('/contacts', key);
    expect(list.body.data).toEqual([]);
    const lookup = await svc.api.post('/contacts/lookup', { emails: ['mine@example.com'] }, key);
    expect(lookup.body).toEqual({ found: [], missing: ['mine@example.com'] });
    expect((await svc.api.get(`/contacts/${mine.body.id}`, { key: acct.project.secretKey })).status).toBe(200);
  });
});

describe('error envelope', () => {
  test('an unknown route is 404 in the envelope, with the request id echoed', async () => {
    const res = await svc.api.get('/nope', { headers: { 'x-request-id': 'trace-123' } });
    expectEnvelope(res, 404, 'NOT_FOUND');
    expect(res.body.error.requestId).toBe('trace-123');
  });

  test('malformed JSON is 400', async () => {
    const res = await svc.api.request('POST', '/contacts', { raw: '{"email": ', key: acct.project.secretKey });
    expectEnvelope(res, 400, 'INVALID_JSON');
  });

  test('a body over 40 MB is 413', async () => {
    const big = JSON.stringify({ email: 'big@example.com', data: { blob: 'x'.repeat(41 * 1024 * 1024) } });
    const res = await svc.api.request('POST', '/contacts', { raw: big, key: acct.project.secretKey });
    expectEnvelope(res, 413, 'PAYLOAD_TOO_LARGE');
    const rows = await dbQuery(svc.databaseUrl, `SELECT 1 FROM contacts WHERE email = 'big@example.com'`);
    expect(rows).toHaveLength(0);
  });

  test('a path id that is not a UUID is 422', async () => {
    const res = await svc.api.get('/contacts/not-a-uuid', { key: acct.project.secretKey });
    expectEnvelope(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'id', code: 'invalid_string' })]);
  });

  test('validation failures list dot-path fields in the spec vocabulary', async () => {
    const res = await svc.api.post('/v1/track', { email: 'bad', event: 42, data: { locale: 5 }, subscribed: 'yes' }, { key: acct.project.publicKey });
    expectEnvelope(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.message).toMatch(/validation failed/i);
    const errors = res.body.error.errors;
    expect(errors).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: 'email', code: 'invalid_string' }),
        expect.objectContaining({ field: 'event', code: 'invalid_type', received: 'number' }),
        expect.objectContaining({ field: 'subscribed', code: 'invalid_type' }),
        expect.objectContaining({ field: 'data.locale', code: 'invalid_type' }),
      ]),
    );
    for (const e of errors) expect(typeof e.message).toBe('string');
  });
});

describe('hostile bodies are 4xx, never 500', () => {
  /** `{"a":{"a":…}}` nested `levels` deep, as raw JSON text. */
  const nested = (levels: number, inner = '1') => '{"a":'.repeat(levels) + inner + '}'.repeat(levels);
  const raw = (method: string, path: string, text: string, key?: string) =>
    svc.api.request(method, path, { raw: text, headers: { 'content-type': 'application/json' }, ...(key ? { key } : {}) });

  test('JSON nested deeper than 64 levels is 422 naming where, on every kind of operation (signed in or not)', async () => {
    const sk = acct.project.secretKey;
    // With the fields each operation requires, so the body reaches validation.
    const deep = `{"email":"deep@example.com","password":"long enough pw","event":"x","name":"n","a":${nested(3999)}}`;
    const cases: Array<[string, string, string | undefined]> = [
      ['POST', '/auth/signup', undefined],
      ['POST', '/auth/login', undefined],
      ['POST', '/v1/track', acct.project.publicKey],
      ['POST', '/v1/send', sk],
      ['POST', '/contacts', sk],
      ['POST', '/segments', sk],
      ['POST', '/workflows', sk],
    ];
    for (const [method, path, key] of cases) {
      const res = await raw(method, path, deep, key);
      expectEnvelope(res, 422, 'VALIDATION_ERROR');
      expect(res.body.error.errors).toEqual([{ field: 'a.'.repeat(63) + 'a', message: expect.stringMatching(/64 levels/), code: 'too_big' }]);
    }
    // 64 levels are fine as far as depth goes (the schema then judges the fields).
    const ok = await raw('POST', '/contacts', `{"email":"deep@example.com","data":${nested(62, '"x"')}}`, sk);
    expect(ok.status).toBe(201);
  });

  test('a lone UTF-16 surrogate is 422 naming the field, and nothing is written', async () => {
    const sk = acct.project.secretKey;
    const lone = 'x\ud800';
    const cases: Array<[string, unknown, string, string]> = [
      ['/contacts', { email: 'lone1@example.com', data: { note: lone } }, 'data.note', sk],
      ['/contacts', { email: 'lone2@example.com', data: { [`k${lone}`]: 1 } }, `data.k${lone}`, sk],
      ['/v1/track', { email: 'lone3@example.com', event: 'x', data: { v: [lone] } }, 'data.v.0', acct.project.publicKey],
      ['/v1/send', { to: 'lone4@example.com', from: 'a@b.test', subject: 's', body: 'b', data: { n: lone } }, 'data.n', sk],
      [
        '/segments',
        { name: 's', condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: lone }] }] } },
        'condition.groups.0.filters.0.value',
        sk,
      ],
      ['/workflows', { name: 'w', triggerConfig: { eventName: lone } }, 'triggerConfig.eventName', sk],
    ];
    for (const [path, body, field, key] of cases) {
      const res = await svc.api.post(path, body, { key });
      expectEnvelope(res, 422, 'VALIDATION_ERROR');
      expect(res.body.error.errors).toEqual([{ field, message: expect.stringMatching(/lone UTF-16 surrogate/), code: 'invalid_string' }]);
    }
    const written = await dbQuery(svc.databaseUrl, `SELECT email FROM contacts WHERE email LIKE 'lone%'`);
    expect(written).toEqual([]);
    // A real pair (an emoji) is text like any other.
    expect((await svc.api.post('/contacts', { email: 'pair@example.com', data: { note: 'ok \ud83d\ude00' } }, { key: sk })).status).toBe(201);
  });
});
