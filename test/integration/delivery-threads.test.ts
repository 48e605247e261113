import crypto from 'node:crypto';
import { DeliveryThreads, InProcessSender, type MessageSender } from '../../src/mail/delivery-threads';
import { Links } from '../../src/mail/links';
import { DEFAULT_PROJECT_SETTINGS } from '../../src/modules/accounts/project-settings';
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
const links = new Links('https://mail.threads.test', 'threads test secret');

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
  ['on delivery threads', () => new DeliveryThreads(smtp.url, { threads: 2, maxConnections: 3 }, links)],
  ['on the main thread (MAIL_THREADS=0)', () => new InProcessSender(smtp.url, 2, links)],
])('delivery %s', (_name, make: () => MessageSender) => {
  test('delivers signed messages with their attachments, and reports each outcome', async () => {
    const sender = make();
    try {
      smtp.reply = (rcpt) => (rcpt[0].startsWith('busy') ? { code: 451, message: 'try later' } : rcpt[0].startsWith('gone') ? { code: 550, message: 'no such user' } : 'accept');
      const outcomes = await Promise.all(['a@example.org', 'b@example.org', 'c@example.org', 'busy@example.org', 'gone@example.org'].map((to) => sender.send(message(to), key)));
      expect(outcomes.map((o) => o.outcome.kind)).toEqual(['sent', 'sent', 'sent', 'retry', 'failed']);
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

  test('renders a campaign draft for its recipient, with links the service verifies', async () => {
    const sender = make();
    try {
      const { subject: _s, text: _t, html: _h, headers: _hd, ...envelope } = message('ada@example.org');
      const contact = { id: crypto.randomUUID(), email: 'ada@example.org', data: { name: 'Ada' } };
      const emailId = crypto.randomUUID();
      const draft = {
        ...envelope,
        attachments: [],
        compose: {
          emailId,
          type: 'MARKETING' as const,
          subject: 'News for {{name}}',
          body: '<html><body><p>Hi {{name}}</p><a href="https://example.com/read">Read</a></body></html>',
          contact,
          headers: {},
          settings: DEFAULT_PROJECT_SETTINGS,
        },
      };
      const delivery = await sender.send(draft, key);
      expect(delivery).toEqual({ outcome: expect.objectContaining({ kind: 'sent' }), subject: 'News for Ada' });
      const [got] = smtp.received;
      expect(got.parsed.subject).toBe('News for Ada');
      expect(got.parsed.text).toContain('Hi Ada');
      const url = new URL(/https:\/\/mail\.threads\.test\/unsubscribe\/[^"]+/.exec(got.parsed.html as string)![0]);
      expect(url.pathname).toBe(`/unsubscribe/${contact.id}`);
      expect(links.verifyContact(contact.id, url.searchParams.get('token') ?? undefined)).toBe(true);
      expect(got.raw.toString()).toMatch(/^List-Unsubscribe: <https:\/\/mail\.threads\.test\/unsubscribe\//m);
      const pixel = new RegExp(`/t/o/${emailId}/([^.]+)\\.gif`).exec(got.parsed.html as string)!;
      expect(links.verifyOpen(emailId, pixel[1])).toBe(true);
    } finally {
      await sender.close();
    }
  });
});

test('a server that cannot be reached is reported unreachable by every thread', async () => {
  const sender = new DeliveryThreads('smtp://127.0.0.1:1', { threads: 2, maxConnections: 2 }, links);
  try {
    const outcomes = await Promise.all([sender.send(message('a@example.org')), sender.send(message('b@example.org'))]);
    expect(outcomes.map((o) => o.outcome.kind)).toEqual(['unreachable', 'unreachable']);
  } finally {
    await sender.close();
  }
});
