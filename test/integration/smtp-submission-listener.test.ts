import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import tls from 'node:tls';
import { createLogger } from '../../src/log';
import {
  InsecureSubmissionError,
  SmtpReply,
  type SubmissionOptions,
  startSubmissionListener,
  type SubmissionHandler,
} from '../../src/mail/submission-listener';
import { ConnectionGate } from '../../src/net/connection-limits';
import { SmtpDialog, testCertificate } from '../setup/smtp-client';
import { until } from '../setup/until';

// The listener's own rules (who may authenticate, throttling, idle connections, certificate renewal),
// with a handler that knows one key; what a message does is tested with the whole service in smtp-submission.test.ts.
const handler: SubmissionHandler<string> = {
  authenticate: async (password) => {
    if (password !== 'sk_right') throw new SmtpReply(535, '5.7.8 Authentication failed');
    return 'project';
  },
  mailFrom: async () => undefined,
  submit: async (_user, envelope) => envelope.to.map(() => crypto.randomUUID()),
};

const log = createLogger('silent');
const gate = (max = 100, perClient = 100) => new ConnectionGate('submission', { max, perClient }, log);
const base: SubmissionOptions = {
  host: '127.0.0.1',
  port: 0,
  allowInsecureAuth: false,
  maxBytes: 1 << 20,
  maxRecipients: 50,
  idleSeconds: 300,
  authTimeoutSeconds: 300,
  authFailureDelayMs: 0,
  gate: gate(),
  log,
};

/** An address of this machine that is not loopback: a client connecting to it is "remote". */
const external = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

(external ? test : test.skip)('a non-loopback client is offered AUTH only after STARTTLS; before it, AUTH is 538 and MAIL 530', async () => {
  const cert = testCertificate();
  const listener = await startSubmissionListener({ ...base, host: '0.0.0.0', gate: gate(), tls: { certFile: cert.cert, keyFile: cert.key } }, handler);
  try {
    const { dialog } = await SmtpDialog.open(listener.port, external);
    const ehlo = await dialog.command('EHLO remote.example');
    expect(ehlo).toContain('STARTTLS');
    expect(ehlo).not.toContain('AUTH');
    expect(await dialog.command('MAIL FROM:<a@acme.test>')).toMatch(/^530 5\.7\.0 Authentication required: STARTTLS, then AUTH/);
    expect(await dialog.startTls()).toMatch(/^220 /);
    expect(await dialog.command('EHLO remote.example')).toContain('AUTH PLAIN LOGIN');
    expect(await dialog.authPlain('app', 'sk_right')).toMatch(/^235 /);
    dialog.close();
    // On loopback AUTH is offered on the plain connection.
    const local = await SmtpDialog.open(listener.port);
    expect(await local.dialog.command('EHLO app.example')).toContain('AUTH PLAIN LOGIN');
    local.dialog.close();
    // SMTP_SUBMISSION_ALLOW_INSECURE_AUTH lifts it.
    const open = await startSubmissionListener({ ...base, host: '0.0.0.0', gate: gate(), allowInsecureAuth: true }, handler);
    const second = await SmtpDialog.open(open.port, external);
    expect(await second.dialog.command('EHLO remote.example')).toContain('AUTH PLAIN LOGIN');
    expect(await second.dialog.authPlain('app', 'sk_right')).toMatch(/^235 /);
    second.dialog.close();
    await open.close();
  } finally {
    await listener.close();
  }
});

test('a listener on a non-loopback address without a certificate refuses to start, unless insecure AUTH is allowed', async () => {
  await expect(startSubmissionListener({ ...base, host: '0.0.0.0', gate: gate() }, handler)).rejects.toBeInstanceOf(InsecureSubmissionError);
  const allowed = await startSubmissionListener({ ...base, host: '0.0.0.0', gate: gate(), allowInsecureAuth: true }, handler);
  await allowed.close();
});

/** `n` connections from `host`, each past EHLO, trying `password` at once. */
async function parallelAuths(port: number, host: string | undefined, n: number, password: string): Promise<string[]> {
  const dialogs = await Promise.all(Array.from({ length: n }, () => SmtpDialog.open(port, host).then(({ dialog }) => dialog)));
  await Promise.all(dialogs.map((d) => d.command('EHLO app.example')));
  const replies = await Promise.all(dialogs.map((d) => d.authPlain('app', password)));
  for (const d of dialogs) d.close();
  return replies;
}

(external ? test : test.skip)('a non-loopback address gets its allowance of AUTHs, counting those in progress; past it even the right key is 454', async () => {
  // The key check takes a while, so all 200 attempts are in progress together.
  const slow: SubmissionHandler<string> = { ...handler, authenticate: (p) => new Promise((r) => setTimeout(r, 300)).then(() => handler.authenticate(p)) };
  const listener = await startSubmissionListener({ ...base, host: '0.0.0.0', allowInsecureAuth: true, gate: gate(300, 300) }, slow);
  try {
    const replies = await parallelAuths(listener.port, external, 200, 'sk_wrong');
    expect(replies.filter((r) => /^535 5\.7\.8 /.test(r))).toHaveLength(10);
    expect(replies.filter((r) => /^454 4\.7\.0 /.test(r))).toHaveLength(190);
    const [again] = await parallelAuths(listener.port, external, 1, 'sk_right');
    expect(again).toMatch(/^454 4\.7\.0 /);
  } finally {
    await listener.close();
  }
});

test("on loopback, other clients' failed AUTHs never lock out the right key; each failure is answered late", async () => {
  const listener = await startSubmissionListener({ ...base, authFailuresAllowed: 3, authFailureDelayMs: 400 }, handler);
  try {
    const started = Date.now();
    const failures = await parallelAuths(listener.port, undefined, 12, 'sk_wrong');
    expect(failures.every((r) => /^535 5\.7\.8 /.test(r))).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(380);
    const [right] = await parallelAuths(listener.port, undefined, 1, 'sk_right');
    expect(right).toMatch(/^235 /);
  } finally {
    await listener.close();
  }
});

test('a connection that has not authenticated within the deadline is closed, however busy it keeps itself', async () => {
  const listener = await startSubmissionListener({ ...base, authTimeoutSeconds: 1 }, handler);
  try {
    const { dialog } = await SmtpDialog.open(listener.port);
    await dialog.command('EHLO app.example');
    // NOOPs keep it from being idle; the deadline closes it anyway.
    let reply = '250';
    for (let i = 0; i < 20 && reply.startsWith('250'); i++) {
      reply = await dialog.command('NOOP');
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(reply).toMatch(/^421 4\.7\.0 No authentication within 1 s/);
    await until(async () => (dialog.closed ? true : undefined), 5_000, 'the connection closed');
    // One that authenticated in time stays.
    const { dialog: authed } = await SmtpDialog.open(listener.port);
    await authed.command('EHLO app.example');
    expect(await authed.authPlain('app', 'sk_right')).toMatch(/^235 /);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await authed.command('NOOP')).toMatch(/^250 /);
    authed.close();
  } finally {
    await listener.close();
  }
});

test('connections past the limit per client address, or in total, are refused with 421 and closed', async () => {
  const listener = await startSubmissionListener({ ...base, gate: gate(5, 3) }, handler);
  try {
    const held = await Promise.all([1, 2, 3].map(() => SmtpDialog.open(listener.port)));
    expect(held.every((h) => h.greeting.startsWith('220 '))).toBe(true);
    const fourth = await SmtpDialog.open(listener.port);
    expect(fourth.greeting).toMatch(/^421 4\.7\.0 Too many connections/);
    await until(async () => (fourth.dialog.closed ? true : undefined), 5_000, 'the refused connection closed');
    // Another address still gets in, up to the total of 5.
    const other = await Promise.all([1, 2].map(() => SmtpDialog.open(listener.port, '127.0.0.1', false, '127.0.0.2')));
    expect(other.every((h) => h.greeting.startsWith('220 '))).toBe(true);
    const sixth = await SmtpDialog.open(listener.port, '127.0.0.1', false, '127.0.0.3');
    expect(sixth.greeting).toMatch(/^421 4\.7\.0 Too many connections/);
    // A closed connection frees its place.
    held[0].dialog.close();
    await until(
      async () => {
        const again = await SmtpDialog.open(listener.port);
        again.dialog.close();
        return again.greeting.startsWith('220 ') ? true : undefined;
      },
      5_000,
      'a place after one closed',
    );
    for (const h of [...held, ...other]) h.dialog.close();
  } finally {
    await listener.close();
  }
});

test('clients are not looked up in reverse DNS unless asked: EHLO names the address', async () => {
  const listener = await startSubmissionListener({ ...base, gate: gate() }, handler);
  try {
    const { dialog } = await SmtpDialog.open(listener.port);
    expect(await dialog.command('EHLO app.example')).toMatch(/Nice to meet you, \[127\.0\.0\.1\]/);
    dialog.close();
  } finally {
    await listener.close();
  }
});

test('an idle connection is closed', async () => {
  const listener = await startSubmissionListener({ ...base, idleSeconds: 1, gate: gate() }, handler);
  try {
    const { dialog } = await SmtpDialog.open(listener.port);
    await dialog.command('EHLO app.example');
    const started = Date.now();
    expect(await dialog.next()).toMatch(/^421 /);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    await until(async () => (dialog.closed ? true : undefined), 5_000, 'the connection closed');
  } finally {
    await listener.close();
  }
});

test('a renewed certificate is served to new connections without a restart; a broken renewal keeps the old one', async () => {
  const first = testCertificate('first.postbox.test');
  const listener = await startSubmissionListener(
    { ...base, gate: gate(), tls: { certFile: first.cert, keyFile: first.key }, tlsPort: 0, tlsPollMs: 100 },
    handler,
  );
  const servedName = () =>
    new Promise<string>((resolve, reject) => {
      const socket = tls.connect({ port: listener.tlsPort!, host: '127.0.0.1', rejectUnauthorized: false }, () => {
        const cn = socket.getPeerCertificate().subject.CN;
        socket.destroy();
        resolve(String(Array.isArray(cn) ? cn[0] : cn));
      });
      socket.once('error', reject);
    });
  try {
    expect(listener.tlsPort).toBeGreaterThan(0);
    expect(await servedName()).toBe('first.postbox.test');
    // A key that does not match the certificate: refused, the first pair stays.
    const other = testCertificate('other.postbox.test');
    fs.copyFileSync(other.key, first.key);
    await new Promise((r) => setTimeout(r, 500));
    expect(await servedName()).toBe('first.postbox.test');
    // Then the renewal lands whole (certificate to match): served from the next connection on.
    fs.copyFileSync(other.cert, first.cert);
    await until(async () => ((await servedName()) === 'other.postbox.test' ? true : undefined), 5_000, 'the renewed certificate');
  } finally {
    await listener.close();
  }
});
