import http from 'node:http';
import os from 'node:os';
import { Writable } from 'node:stream';
import nodemailer from 'nodemailer';
import pino from 'pino';
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

/** This machine's first non-loopback IPv4 address (the test connects from it and to it). */
function outsideAddress(): string {
  const found = Object.values(os.networkInterfaces())
    .flat()
    .find((i) => i && i.family === 'IPv4' && !i.internal);
  if (!found) throw new Error('this test needs a non-loopback IPv4 interface');
  return found.address;
}

/** GET from `address` to `address`: a client on the network, not on loopback. */
function getFrom(address: string, port: number, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: address, port, path, localAddress: address, headers }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject);
  });
}

test('the dev mailbox answers only loopback clients, whatever X-Forwarded-For says; a non-loopback HOST is warned about', async () => {
  const lines: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'warn' }, new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
  const open = await startTestService({ HOST: '0.0.0.0', TRUST_PROXY: 'true', ALLOWED_HOSTS: 'mail.dev.test' }, 'all', log);
  try {
    const address = outsideAddress();
    const port = Number(new URL(open.url!).port);
    // A name the operator allowed is answered, on any port.
    expect(await getFrom('127.0.0.1', port, '/dev/mailbox', { host: 'mail.dev.test:4000' })).toBe(200);
    expect(await getFrom(address, port, '/health')).toBe(200);
    for (const path of ['/dev/mailbox', `/dev/mailbox/${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}`]) {
      expect(await getFrom(address, port, path)).toBe(403);
      expect(await getFrom(address, port, path, { 'x-forwarded-for': '127.0.0.1', 'x-real-ip': '127.0.0.1' })).toBe(403);
    }
    expect((await open.api.get('/dev/mailbox')).status).toBe(200);
    expect(lines.some((l) => l.level === 40 && /HOST is not a loopback address/.test(l.msg))).toBe(true);
  } finally {
    await open.stop();
  }
});

test('DNS rebinding: the dev mailbox answers a loopback client only when Host names this machine on this port', async () => {
  const port = Number(new URL(svc.url!).port);
  for (const host of [`evil.test:${port}`, 'evil.test', `127.0.0.1:${port + 1}`, `127.0.0.1.evil.test:${port}`]) {
    expect(await getFrom('127.0.0.1', port, '/dev/mailbox', { host })).toBe(403);
  }
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
    expect(await getFrom('127.0.0.1', port, '/dev/mailbox', { host })).toBe(200);
  }
  // The rest of the API is not a local tool: any Host reaches it.
  expect(await getFrom('127.0.0.1', port, '/health', { host: 'evil.test' })).toBe(200);
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
