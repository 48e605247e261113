import crypto from 'node:crypto';
import { dbQuery } from '../setup/db';
import { createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc.stop());

const cookieOf = (res: { headers: Headers }) => (res.headers.get('set-cookie') ?? '').split(';')[0];

test('X-Forwarded-Proto is believed only with TRUST_PROXY: a client cannot make the session cookie Secure-only, a trusted proxy can', async () => {
  const https = { 'x-forwarded-proto': 'https' };
  const direct = await svc.api.post('/auth/signup', { email: 'proxy-off@example.com', password: 'long enough pw' }, { headers: https });
  expect(direct.status).toBe(201);
  expect((direct.headers.get('set-cookie') ?? '').toLowerCase()).not.toContain('secure');
  const behindProxy = await startTestService({ TRUST_PROXY: 'true' });
  try {
    const res = await behindProxy.api.post('/auth/signup', { email: 'proxy-on@example.com', password: 'long enough pw' }, { headers: https });
    expect(res.status).toBe(201);
    expect((res.headers.get('set-cookie') ?? '').toLowerCase()).toContain('secure');
  } finally {
    await behindProxy.stop();
  }
});

test("a password hashed with older scrypt parameters still logs in, and is rehashed with today's on that login", async () => {
  await svc.api.post('/auth/signup', { email: 'old-hash@example.com', password: 'placeholder pw' });
  const salt = crypto.randomBytes(16);
  const old = crypto.scryptSync('the old password', salt, 64, { N: 16384, r: 8, p: 1 });
  const oldHash = ['scrypt', 16384, 8, 1, salt.toString('base64'), old.toString('base64')].join('$');
  await dbQuery(svc.databaseUrl, `UPDATE users SET password_hash = $1 WHERE email = 'old-hash@example.com'`, [oldHash]);

  expect((await svc.api.post('/auth/login', { email: 'old-hash@example.com', password: 'wrong' })).status).toBe(401);
  expect((await dbQuery(svc.databaseUrl, `SELECT password_hash FROM users WHERE email = 'old-hash@example.com'`))[0].password_hash).toBe(oldHash);
  expect((await svc.api.post('/auth/login', { email: 'old-hash@example.com', password: 'the old password' })).status).toBe(200);
  const [row] = await dbQuery(svc.databaseUrl, `SELECT password_hash FROM users WHERE email = 'old-hash@example.com'`);
  expect(row.password_hash).toMatch(/^scrypt\$131072\$8\$1\$/);
  expect((await svc.api.post('/auth/login', { email: 'old-hash@example.com', password: 'the old password' })).status).toBe(200);
});

describe('signup, login, logout', () => {
  test('signup creates the user, sets an HttpOnly JWT cookie and never returns the password hash', async () => {
    const res = await svc.api.post('/auth/signup', { email: '  Alice@Example.COM ', password: 'long enough pw' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ email: 'alice@example.com', emailVerified: false });
    expect(JSON.stringify(res.body)).not.toMatch(/password|scrypt/i);
    const setCookie = res.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^token=[\w-]+\.[\w-]+\.[\w-]+;/);
    expect(setCookie.toLowerCase()).toContain('httponly');
    const [row] = await dbQuery(svc.databaseUrl, `SELECT password_hash FROM users WHERE email = 'alice@example.com'`);
    expect(row.password_hash).toMatch(/^scrypt\$131072\$8\$1\$/); // OWASP's minimum
    expect(row.password_hash).not.toContain('long enough pw');

    const me = await svc.api.get('/users/@me', { cookie: cookieOf(res) });
    expect(me.status).toBe(200);
    expect(me.body.email).toBe('alice@example.com');
  });

  test('a second signup with the same email is 409 and bad input is 422 with nothing written', async () => {
    await svc.api.post('/auth/signup', { email: 'bob@example.com', password: 'long enough pw' });
    const dup = await svc.api.post('/auth/signup', { email: 'BOB@example.com', password: 'another password' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('EMAIL_TAKEN');

    const before = await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM users');
    const bad = await svc.api.post('/auth/signup', { email: 'not-an-email', password: 'short' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    const fields = bad.body.error.errors.map((e: any) => [e.field, e.code]);
    expect(fields).toEqual(
      expect.arrayContaining([
        ['email', 'invalid_string'],
        ['password', 'too_small'],
      ]),
    );
    const after = await dbQuery(svc.databaseUrl, 'SELECT count(*)::int AS n FROM users');
    expect(after[0].n).toBe(before[0].n);
  });

  test('login with the right password sets the cookie; a wrong one is 401; logout clears it', async () => {
    await svc.api.post('/auth/signup', { email: 'carol@example.com', password: 'long enough pw' });
    const wrong = await svc.api.post('/auth/login', { email: 'carol@example.com', password: 'wrong password' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error.code).toBe('INVALID_CREDENTIALS');
    const unknown = await svc.api.post('/auth/login', { email: 'nobody@example.com', password: 'whatever1' });
    expect(unknown.status).toBe(401);

    const ok = await svc.api.post('/auth/login', { email: 'Carol@example.com', password: 'long enough pw' });
    expect(ok.status).toBe(200);
    expect((await svc.api.get('/users/@me', { cookie: cookieOf(ok) })).status).toBe(200);

    const out = await svc.api.get('/auth/logout', { cookie: cookieOf(ok) });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/^token=;/);
  });

  test('dashboard endpoints need a valid session', async () => {
    expect((await svc.api.get('/users/@me')).status).toBe(401);
    expect((await svc.api.get('/users/@me', { cookie: 'token=not.a.jwt' })).status).toBe(401);
    const forged = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl';
    expect((await svc.api.get('/users/@me', { cookie: `token=${forged}` })).status).toBe(401);
  });
});

describe('projects and keys', () => {
  test('creating a project returns both keys in the documented format, and lists them', async () => {
    const { cookie, project } = await createAccount(svc.api, 'Shop');
    expect(project).toMatchObject({ name: 'Shop', role: 'OWNER' });
    expect(project.publicKey).toMatch(/^pk_[0-9a-f]{48}$/);
    expect(project.secretKey).toMatch(/^sk_[0-9a-f]{48}$/);
    const list = await svc.api.get('/users/@me/projects', { cookie });
    expect(list.status).toBe(200);
    expect(list.body).toEqual([expect.objectContaining({ id: project.id, publicKey: project.publicKey, secretKey: project.secretKey })]);
  });

  test('a project name is required', async () => {
    const { cookie } = await createAccount(svc.api);
    const res = await svc.api.post('/users/@me/projects', { name: '' }, { cookie });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'name', code: 'too_small' });
  });

  test('PATCH renames; another user cannot see or change the project', async () => {
    const a = await createAccount(svc.api, 'Mine');
    const b = await createAccount(svc.api, 'Theirs');
    const res = await svc.api.patch(`/users/@me/projects/${a.project.id}`, { name: 'Renamed' }, { cookie: a.cookie });
    expect(res.status).toBe(200);
    expect(res.body.name).toBe('Renamed');
    const other = await svc.api.patch(`/users/@me/projects/${a.project.id}`, { name: 'Hijack' }, { cookie: b.cookie });
    expect(other.status).toBe(404);
    const rotate = await svc.api.post(`/users/@me/projects/${a.project.id}/regenerate-keys`, {}, { cookie: b.cookie });
    expect(rotate.status).toBe(404);
  });

  test('regenerate-keys replaces both keys; the old ones are refused at once', async () => {
    const { cookie, project } = await createAccount(svc.api);
    expect((await svc.api.get('/contacts', { key: project.secretKey })).status).toBe(200);
    const res = await svc.api.post(`/users/@me/projects/${project.id}/regenerate-keys`, {}, { cookie });
    expect(res.status).toBe(200);
    expect(res.body.publicKey).toMatch(/^pk_[0-9a-f]{48}$/);
    expect(res.body.secretKey).not.toBe(project.secretKey);
    expect(res.body.publicKey).not.toBe(project.publicKey);

    const old = await svc.api.get('/contacts', { key: project.secretKey });
    expect(old.status).toBe(401);
    expect(old.body.error.code).toBe('INVALID_API_KEY');
    const oldPublic = await svc.api.post('/v1/track', { email: 'a@b.co', event: 'x' }, { key: project.publicKey });
    expect(oldPublic.status).toBe(401);
    expect((await svc.api.get('/contacts', { key: res.body.secretKey })).status).toBe(200);
    expect((await svc.api.post('/v1/track', { email: 'a@b.co', event: 'x' }, { key: res.body.publicKey })).status).toBe(200);
  });
});

test('DISABLE_SIGNUP=true refuses signup with 403', async () => {
  const closed = await startTestService({ DISABLE_SIGNUP: 'true' });
  try {
    const res = await closed.api.post('/auth/signup', { email: 'x@example.com', password: 'long enough pw' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('SIGNUP_DISABLED');
    expect(await dbQuery(closed.databaseUrl, 'SELECT * FROM users')).toHaveLength(0);
  } finally {
    await closed.stop();
  }
});
