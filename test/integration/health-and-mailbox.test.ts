import nodemailer from 'nodemailer';
import { dbQuery } from '../setup/db';
import { startTestService, type TestService } from '../setup/service';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc.stop());

test('GET /health is 200 when the database answers, 503 naming it when it does not', async () => {
  const ok = await svc.api.get('/health');
  expect(ok.status).toBe(200);
  expect(ok.body).toMatchObject({ status: 'ok', checks: { database: { status: 'ok' } } });

  const dbName = new URL(svc.databaseUrl).pathname.slice(1);
  const admin = new URL(svc.databaseUrl);
  admin.pathname = '/postgres';
  await dbQuery(admin.toString(), `ALTER DATABASE ${dbName} ALLOW_CONNECTIONS false`);
  await dbQuery(admin.toString(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, [dbName]);
  try {
    const down = await svc.api.get('/health');
    expect(down.status).toBe(503);
    expect(down.body).toMatchObject({ status: 'error', failing: ['database'], checks: { database: { status: 'error' } } });
  } finally {
    await dbQuery(admin.toString(), `ALTER DATABASE ${dbName} ALLOW_CONNECTIONS true`);
  }
  let back = await svc.api.get('/health');
  for (let i = 0; i < 5 && back.status !== 200; i++) back = await svc.api.get('/health');
  expect(back.status).toBe(200);
});

test('the dev mailbox catches mail sent to the built-in SMTP server and lists it', async () => {
  const transport = nodemailer.createTransport({ url: svc.smtpUrl } as never);
  await transport.sendMail({
    from: 'Sender <sender@example.com>',
    to: 'Reader <reader@example.org>',
    subject: 'Hello from the test',
    text: 'plain body',
    html: '<p>html body</p>',
    attachments: [{ filename: 'note.txt', content: 'attached' }],
  });
  transport.close();
  const res = await svc.api.get('/dev/mailbox');
  expect(res.status).toBe(200);
  expect(res.body.total).toBe(1);
  const [msg] = res.body.data;
  expect(msg).toMatchObject({
    subject: 'Hello from the test',
    envelope: { from: 'sender@example.com', to: ['reader@example.org'] },
    from: [{ name: 'Sender', address: 'sender@example.com' }],
    to: [{ name: 'Reader', address: 'reader@example.org' }],
    text: expect.stringContaining('plain body'),
    html: expect.stringContaining('<p>html body</p>'),
    attachments: [expect.objectContaining({ filename: 'note.txt', contentType: 'text/plain' })],
  });
  const one = await svc.api.get(`/dev/mailbox/${msg.id}`);
  expect(one.body.subject).toBe('Hello from the test');
  const raw = await svc.api.get(`/dev/mailbox/${msg.id}/raw`);
  expect(raw.headers.get('content-type')).toContain('message/rfc822');
  expect(String(raw.body)).toContain('Subject: Hello from the test');
  expect((await svc.api.get('/dev/mailbox?to=nobody@example.org')).body.data).toEqual([]);
  expect((await svc.api.delete('/dev/mailbox')).body).toEqual({ deleted: 1 });
});

test('with SMTP_URL set there is no built-in mailbox and no /dev/mailbox route', async () => {
  const withSmtp = await startTestService({ SMTP_URL: 'smtp://127.0.0.1:2' });
  try {
    expect((await withSmtp.api.get('/dev/mailbox')).status).toBe(404);
    expect(withSmtp.smtpUrl).toBe('smtp://127.0.0.1:2');
    expect((await withSmtp.api.get('/config')).body).toMatchObject({ devMailbox: false });
  } finally {
    await withSmtp.stop();
  }
});

test('GET /config (no authentication) and GET /auth/oauth-config say which integrations are enabled', async () => {
  const config = await svc.api.get('/config');
  expect(config.status).toBe(200);
  expect(config.body).toEqual({ signup: true, billing: false, oauth: { providers: [] }, snsDeliveryEvents: true, s3Uploads: false, devMailbox: true });
  expect((await svc.api.get('/auth/oauth-config')).body).toEqual({ providers: [] });
  const closed = await startTestService({ DISABLE_SIGNUP: 'true' });
  try {
    expect((await closed.api.get('/config')).body).toMatchObject({ signup: false });
  } finally {
    await closed.stop();
  }
});
