import crypto from 'node:crypto';
import { DeliveryThreads, InProcessSender, type MessageSender } from '../../src/mail/delivery-threads';
import type { OutgoingMessage } from '../../src/mail/mime';
import { SmtpSink } from '../setup/smtp-sink';

let smtp: SmtpSink;
beforeAll(async () => {
  smtp = await new SmtpSink().start();
});
afterAll(() => smtp.stop());
beforeEach(() => {
  smtp.received.length = 0;
  smtp.reply = () => 'accept';
});

const key = { domainName: 'threads.test', keySelector: 'pb', privateKey: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey };
const attachment = crypto.randomBytes(3000);

const message = (to: string): OutgoingMessage => ({
  messageId: `<${crypto.randomUUID()}@threads.test>`,
  from: { name: 'Threads', address: 'hello@threads.test' },
  to: { name: null, address: to },
  replyTo: 'hello@threads.test',
  subject: 'Über threads',
  text: 'Hi.',
  html: '<p>Hi.</p>',
  headers: { 'X-Kind': 'test' },
  attachments: [{ filename: 'data.bin', contentType: 'application/octet-stream', content: attachment, disposition: 'attachment', contentId: null }],
});

describe.each([
  ['on delivery threads', () => new DeliveryThreads(smtp.url, { threads: 2, maxConnections: 3 })],
  ['on the main thread (MAIL_THREADS=0)', () => new InProcessSender(smtp.url, 2)],
])('delivery %s', (_name, make: () => MessageSender) => {
  test('delivers signed messages with their attachments, and reports each outcome', async () => {
    const sender = make();
    try {
      smtp.reply = (rcpt) => (rcpt[0].startsWith('busy') ? { code: 451, message: 'try later' } : rcpt[0].startsWith('gone') ? { code: 550, message: 'no such user' } : 'accept');
      const outcomes = await Promise.all(['a@example.org', 'b@example.org', 'c@example.org', 'busy@example.org', 'gone@example.org'].map((to) => sender.send(message(to), key)));
      expect(outcomes.map((o) => o.kind)).toEqual(['sent', 'sent', 'sent', 'retry', 'failed']);
      expect(smtp.received).toHaveLength(3);
      for (const r of smtp.received) {
        expect(r.parsed.subject).toBe('Über threads');
        expect(r.raw.toString()).toMatch(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=threads\.test;/);
        expect(r.parsed.attachments[0].content.equals(attachment)).toBe(true);
      }
    } finally {
      await sender.close();
    }
  });
});

test('a server that cannot be reached is reported unreachable by every thread', async () => {
  const sender = new DeliveryThreads('smtp://127.0.0.1:1', { threads: 2, maxConnections: 2 });
  try {
    const outcomes = await Promise.all([sender.send(message('a@example.org')), sender.send(message('b@example.org'))]);
    expect(outcomes.map((o) => o.kind)).toEqual(['unreachable', 'unreachable']);
  } finally {
    await sender.close();
  }
});
