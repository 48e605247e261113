/**
 * The ceiling of each part of delivery, measured alone on one core: what one campaign message costs
 * to render, to turn into text, to compose and sign (nodemailer's way and the service's), and what
 * the transport alone reaches sending ready bytes to Postfix's smtp-sink over 8 connections (the
 * service's SmtpSessions, and nodemailer's pooled transport).
 *
 *   npm run bench:parts
 */
import crypto from 'node:crypto';
import { createTransport } from 'nodemailer';
import MailComposer from 'nodemailer/lib/mail-composer';
import { Links } from '../src/mail/links';
import { encodeMessage, type OutgoingMessage } from '../src/mail/mime';
import { renderTemplate } from '../src/mail/liquid';
import { htmlToText } from '../src/mail/text';
import { addTracking } from '../src/mail/tracking';
import { SmtpSessions } from '../src/mail/transport';
import { DEFAULT_PROJECT_SETTINGS } from '../src/modules/accounts/project-settings';
import { composeMessage } from '../src/mail/compose';
import { benchTemplates, CAMPAIGN_LIQUID_BODY, machine } from './service-process';
import { startSinkProcess } from './smtp-sink-process';

const BODY = `<html><body><h1>Hello {{name ?? there}}</h1><p>${'This month in review. '.repeat(40)}</p><a href="https://example.com/x">Read</a></body></html>`;
const links = new Links('https://mail.bench.test', 'bench secret');
const pair = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const dkim = { domainName: 'bench.test', keySelector: 'pb', privateKey: pair.privateKey };

/** Microseconds per call: the median of five timed rounds after a warm-up round. */
function perCall(n: number, fn: (i: number) => unknown): number {
  const rounds: number[] = [];
  for (let r = 0; r < 6; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) fn(i);
    if (r > 0) rounds.push(Number(process.hrtime.bigint() - t0) / 1000 / n);
  }
  return rounds.sort((a, b) => a - b)[2];
}

async function perCallAsync(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const rounds: number[] = [];
  for (let r = 0; r < 4; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await fn(i);
    if (r > 0) rounds.push(Number(process.hrtime.bigint() - t0) / 1000 / n);
  }
  return rounds.sort((a, b) => a - b)[1];
}

const contact = (i: number) => ({ id: crypto.randomUUID(), email: `user${i}@example.org`, data: { name: `User ${i}` } });

function message(i: number, template = { subject: 'News for {{name}}', body: BODY }): OutgoingMessage {
  const c = composeMessage({
    emailId: crypto.randomUUID(),
    type: 'MARKETING',
    ...template,
    contact: contact(i),
    headers: {},
    settings: DEFAULT_PROJECT_SETTINGS,
    links,
  });
  return {
    messageId: `<${crypto.randomUUID()}@bench.test>`,
    from: { name: 'News', address: 'news@bench.test' },
    to: { name: null, address: `user${i}@example.org` },
    replyTo: 'news@bench.test',
    subject: c.subject,
    text: c.text,
    html: c.html,
    headers: c.headers,
    attachments: [],
  };
}

const nodemailerOptions = (m: OutgoingMessage, key: unknown) => ({
  messageId: m.messageId,
  from: { name: m.from.name ?? '', address: m.from.address },
  to: m.to.address,
  replyTo: m.replyTo,
  subject: m.subject,
  text: m.text ?? undefined,
  html: m.html,
  headers: m.headers,
  dkim: { domainName: 'bench.test', keySelector: 'pb', privateKey: key as string },
});

async function main(): Promise<void> {
  console.log(`machine: ${machine()}`);
  const samples = Array.from({ length: 200 }, (_, i) => message(i));
  const html = samples[0].html!;
  const row = (what: string, us: number) => console.log(`${what.padEnd(64)} ${us.toFixed(0).padStart(6)} µs  ${(1e6 / us).toFixed(0).padStart(7)} /s`);

  row(
    'render {{var}} placeholders (renderTemplate, html mode)',
    perCall(2000, (i) => renderTemplate(BODY, { name: `User ${i}` }, 'html')),
  );
  row(
    'render Liquid: a loop of 10 items, 3 conditionals (html mode)',
    perCall(2000, (i) => renderTemplate(CAMPAIGN_LIQUID_BODY, { name: `User ${i}` }, 'html')),
  );
  row(
    'html-to-text of the rendered HTML',
    perCall(2000, () => htmlToText(html)),
  );
  row(
    'tracking links and pixel (addTracking)',
    perCall(2000, (i) => addTracking(html, String(i), links, { opens: true, clicks: true })),
  );
  row(
    'composeMessage (all of the above, per recipient)',
    perCall(1000, (i) => message(i)),
  );
  row(
    'composeMessage of the Liquid template (its subject too)',
    perCall(1000, (i) => message(i, benchTemplates.liquid)),
  );
  row(
    'RSA-2048 signature, parsed key',
    perCall(1000, (i) => crypto.sign('sha256', Buffer.from(String(i)), pair.privateKey)),
  );
  row('encodeMessage without DKIM', await perCallAsync(2000, (i) => encodeMessage(samples[i % 200])));
  row('encodeMessage with DKIM (one at a time)', await perCallAsync(1000, (i) => encodeMessage(samples[i % 200], dkim)));
  row(
    'nodemailer MailComposer + DKIM, parsed key',
    await perCallAsync(500, (i) => new MailComposer(nodemailerOptions(samples[i % 200], pair.privateKey) as never).compile().build()),
  );
  row(
    'nodemailer MailComposer, no DKIM',
    await perCallAsync(500, (i) => new MailComposer({ ...nodemailerOptions(samples[i % 200], pem), dkim: undefined } as never).compile().build()),
  );

  const sink = await startSinkProcess();
  const transport = createTransport({ pool: true, host: '127.0.0.1', port: sink.port, maxConnections: 8, maxMessages: Infinity });
  const sessions = new SmtpSessions(`smtp://127.0.0.1:${sink.port}`, 8);
  const raws = await Promise.all(samples.map((m) => encodeMessage(m, dkim)));
  for (const [label, send] of [
    ['SmtpSessions (the service): ready bytes, 8 connections', (i: number) => sessions.send(raws[i % 200].envelope, raws[i % 200].raw)],
    ['transport alone: ready bytes ({envelope, raw}), 8 connections', (i: number) => transport.sendMail(raws[i % 200])],
    ['transport: nodemailer composing and signing (PEM), 8 connections', (i: number) => transport.sendMail(nodemailerOptions(samples[i % 200], pem) as never)],
  ] as const) {
    const rates: number[] = [];
    for (let r = 0; r < 3; r++) {
      const n = 5000;
      const start = await sink.count();
      const t0 = Date.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next < n) await send(next++);
        }),
      );
      await sink.waitFor(start + n, 120_000);
      rates.push(n / ((Date.now() - t0) / 1000));
    }
    const rate = rates.sort((a, b) => a - b)[1];
    row(label, 1e6 / rate);
  }
  transport.close();
  sessions.close();
  await sink.stop();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
