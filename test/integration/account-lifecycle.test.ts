import { dbQuery } from '../setup/db';
import { caughtMail, mailedToken as mailed } from '../setup/mailbox';
import { startTestService, type TestService } from '../setup/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService({ PUBLIC_URL: 'https://app.example.test', SYSTEM_EMAIL_FROM: 'accounts@example.test' });
});
afterAll(() => svc.stop());

/** The token mailed to `to`, after checking the mail's sender and that its link is under PUBLIC_URL. */
async function mailedToken(to: string, subject: string, after = 0): Promise<string> {
  const mail = await caughtMail(svc, to, subject, after);
  expect(mail.from).toEqual([expect.objectContaining({ address: 'accounts@example.test' })]);
  expect(mail.text).toMatch(/https:\/\/app\.example\.test\/[a-z-]+\?token=/);
  return mailed(svc, to, subject, after);
}

test('signup mails a verification link; its token verifies the address once', async () => {
  const signup = await svc.api.post('/auth/signup', { email: 'new@life.test', password: 'first password' });
  expect(signup.status).toBe(201);
  expect(signup.body.emailVerified).toBe(false);
  const token = await mailedToken('new@life.test', 'Verify your email address');
  const verified = await svc.api.post('/auth/verify-email', { token });
  expect(verified.status).toBe(200);
  expect(verified.body).toMatchObject({ email: 'new@life.test', emailVerified: true });
  const again = await svc.api.post('/auth/verify-email', { token });
  expect(again.status).toBe(400);
  expect(again.body.error.code).toBe('INVALID_TOKEN');
  expect((await svc.api.post('/auth/verify-email', { token: 'made-up' })).status).toBe(400);
  expect((await svc.api.post('/auth/verify-email', {})).status).toBe(422);

  const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
  const resend = await svc.api.post('/auth/request-verification', {}, { cookie });
  expect(resend.status).toBe(400);
  expect(resend.body.error.code).toBe('ALREADY_VERIFIED');
  expect((await svc.api.post('/auth/request-verification', {})).status).toBe(401);
});

test('POST /auth/request-verification mails a signed-in, unverified user a fresh link, and that link verifies', async () => {
  const signup = await svc.api.post('/auth/signup', { email: 'lost@life.test', password: 'first password' });
  const cookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
  const first = await mailedToken('lost@life.test', 'Verify your email address');
  const resend = await svc.api.post('/auth/request-verification', {}, { cookie });
  expect(resend.status).toBe(202);
  expect(resend.body).toEqual({ success: true });
  const second = await mailedToken('lost@life.test', 'Verify your email address', 1);
  expect(second).not.toBe(first);
  const verified = await svc.api.post('/auth/verify-email', { token: second });
  expect(verified.status).toBe(200);
  expect(verified.body).toMatchObject({ email: 'lost@life.test', emailVerified: true });
  expect((await svc.api.get('/users/@me', { cookie })).body.emailVerified).toBe(true);
});

test('password reset: same answer for unknown addresses; the mailed token sets a new password once; expired tokens fail', async () => {
  await svc.api.post('/auth/signup', { email: 'forgot@life.test', password: 'old password' });
  expect((await svc.api.post('/auth/request-password-reset', { email: 'nobody@life.test' })).status).toBe(202);
  const asked = await svc.api.post('/auth/request-password-reset', { email: 'Forgot@Life.test' });
  expect(asked.status).toBe(202);
  expect(asked.body).toEqual({ success: true });
  const token = await mailedToken('forgot@life.test', 'Reset your password');
  expect((await svc.api.post('/auth/reset-password', { token, password: 'short' })).status).toBe(422);
  expect((await svc.api.post('/auth/reset-password', { token, password: 'brand new password' })).status).toBe(200);
  expect((await svc.api.post('/auth/reset-password', { token, password: 'another password' })).status).toBe(400);
  expect((await svc.api.post('/auth/login', { email: 'forgot@life.test', password: 'old password' })).status).toBe(401);
  expect((await svc.api.post('/auth/login', { email: 'forgot@life.test', password: 'brand new password' })).status).toBe(200);
  expect((await svc.api.get('/dev/mailbox?to=nobody%40life.test')).body.data).toEqual([]);

  await svc.api.post('/auth/request-password-reset', { email: 'forgot@life.test' });
  const late = await mailedToken('forgot@life.test', 'Reset your password', 1);
  await dbQuery(svc.databaseUrl, `UPDATE auth_tokens SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`);
  const expired = await svc.api.post('/auth/reset-password', { token: late, password: 'too late password' });
  expect(expired.status).toBe(400);
  expect(expired.body.error.code).toBe('INVALID_TOKEN');
  const [{ n }] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM auth_tokens WHERE token_hash = $1`, [late]);
  expect(n).toBe(0); // only a hash of the token is stored
});
