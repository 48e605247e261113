import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import tls from 'node:tls';
import { createLogger } from '../../src/log';
import { SmtpReply, type SubmissionOptions, startSubmissionSmtp, type SubmissionHandler } from '../../src/mail/submission-smtp';
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
const base: SubmissionOptions = { host: '127.0.0.1', port: 0, allowInsecureAuth: false, maxBytes: 1 << 20, maxRecipients: 50, idleSeconds: 300, log };

/** An address of this machine that is not loopback: a client connecting to it is "remote". */
const external = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

(external ? test : test.skip)('AUTH without TLS from a non-loopback address is 538 5.7.11; over STARTTLS it is accepted', async () => {
  const cert = testCertificate();
  const listener = await startSubmissionSmtp({ ...base, host: '0.0.0.0', tls: { certFile: cert.cert, keyFile: cert.key } }, handler);
  try {
    const { dialog } = await SmtpDialog.open(listener.port, external);
    await dialog.command('EHLO remote.example');
    expect(await dialog.authPlain('app', 'sk_right')).toMatch(/^538 5\.7\.11 /);
    expect(await dialog.startTls()).toMatch(/^220 /);
    await dialog.command('EHLO remote.example');
    expect(await dialog.authPlain('app', 'sk_right')).toMatch(/^235 /);
    dialog.close();
    // SMTP_SUBMISSION_ALLOW_INSECURE_AUTH lifts it.
    const open = await startSubmissionSmtp({ ...base, host: '0.0.0.0', allowInsecureAuth: true }, handler);
    const second = await SmtpDialog.open(open.port, external);
    await second.dialog.command('EHLO remote.example');
    expect(await second.dialog.authPlain('app', 'sk_right')).toMatch(/^235 /);
    second.dialog.close();
    await open.close();
  } finally {
    await listener.close();
  }
});

test('failed AUTHs from one address are throttled: past the allowance even the right key gets 454 4.7.0', async () => {
  const listener = await startSubmissionSmtp({ ...base, authFailuresAllowed: 3 }, handler);
  try {
    for (let i = 0; i < 3; i++) {
      const { dialog } = await SmtpDialog.open(listener.port);
      await dialog.command('EHLO app.example');
      expect(await dialog.authPlain('app', `sk_wrong${i}`)).toMatch(/^535 5\.7\.8 /);
      dialog.close();
    }
    const { dialog } = await SmtpDialog.open(listener.port);
    await dialog.command('EHLO app.example');
    expect(await dialog.authPlain('app', 'sk_right')).toMatch(/^454 4\.7\.0 /);
    dialog.close();
  } finally {
    await listener.close();
  }
});

test('an idle connection is closed', async () => {
  const listener = await startSubmissionSmtp({ ...base, idleSeconds: 1 }, handler);
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
  const listener = await startSubmissionSmtp({ ...base, tls: { certFile: first.cert, keyFile: first.key }, tlsPort: 0, tlsPollMs: 100 }, handler);
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
