import crypto from 'node:crypto';
import { DeliveryThreads, InProcessSender, type MessageSender } from '../../src/delivery/delivery-threads';
import { Links } from '../../src/mail/links';
import { SmtpSessions } from '../../src/mail/transport';
import { DEFAULT_PROJECT_SETTINGS } from '../../src/modules/accounts/project-settings';
import type { OutgoingMessage } from '../../src/mail/mime';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dkimStatus } from '../setup/dkim';
import { SmtpSink } from '../setup/smtp-sink';

const pair = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
let smtp: SmtpSink;
let dns: ZoneDnsServer;
beforeAll(async () => {
  smtp = await new SmtpSink().start();
  dns = await new ZoneDnsServer().start();
  dns.add('pb._domainkey.threads.test', 'TXT', `v=DKIM1; k=rsa; p=${pair.publicKey.export({ type: 'spki', format: 'der' }).toString('base64')}`);
});
afterAll(async () => {
  await smtp.stop();
  await dns.stop();
});
beforeEach(() => {
  smtp.received.length = 0;
  smtp.reply = () => 'accept';
});

const key = { domainName: 'threads.test', keySelector: 'pb', privateKey: pair.privateKey };
/** Verified as a receiving server does, on the bytes as they arrived over SMTP. */
const dkimResult = async (raw: Buffer) => (await dkimStatus(raw, dns, 'hello@threads.test')).result;
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
      smtp.reply = (rcpt) =>
        rcpt[0].startsWith('busy') ? { code: 451, message: 'try later' } : rcpt[0].startsWith('gone') ? { code: 550, message: 'no such user' } : 'accept';
      const outcomes = await Promise.all(
        ['a@example.org', 'b@example.org', 'c@example.org', 'busy@example.org', 'gone@example.org'].map((to) => sender.send(message(to), key)),
      );
      expect(outcomes.map((o) => o.outcome.kind)).toEqual(['sent', 'sent', 'sent', 'retry', 'failed']);
      expect(smtp.received).toHaveLength(3);
      for (const r of smtp.received) {
        expect(r.parsed.subject).toBe('Über threads');
        expect(r.raw.toString()).toMatch(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=threads\.test;/);
        expect(r.parsed.attachments[0].content.equals(attachment)).toBe(true);
        expect(await dkimResult(r.raw)).toBe('pass');
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
      expect(await dkimResult(got.raw)).toBe('pass');
    } finally {
      await sender.close();
    }
  });

  test('the signature survives the wire: non-ASCII names and subject, long lines, lines starting with a dot, inline images', async () => {
    const sender = make();
    try {
      const shaped: OutgoingMessage = {
        ...message('yamada@example.org'),
        from: { name: 'Zoë Ünal', address: 'hello@threads.test' },
        to: { name: '山田 太郎', address: 'yamada@example.org' },
        subject: 'Grüße aus Köln — 東京 📬',
        text: `${'word '.repeat(300)}   \n.starts with a dot\n..two dots\n.\n\n`,
        html: `<p>${'x'.repeat(2000)}</p>\n.\n<p><img src="cid:logo@threads"></p>   `,
        headers: { 'X-Entity-Ref-ID': 'ü-ref 42', 'List-Unsubscribe': '<https://mail.threads.test/unsubscribe/' + 'a'.repeat(120) + '>' },
        attachments: [
          { filename: 'logo.png', contentType: 'image/png', content: crypto.randomBytes(800), disposition: 'inline', contentId: 'logo@threads' },
          { filename: 'Übersicht 2026.csv', contentType: 'text/csv', content: Buffer.from('a,b\n1,2\n'), disposition: 'attachment', contentId: null },
        ],
      };
      expect((await sender.send(shaped, key)).outcome.kind).toBe('sent');
      const [got] = smtp.received;
      expect(got.parsed.subject).toBe('Grüße aus Köln — 東京 📬');
      expect(got.parsed.text).toContain('\n.starts with a dot\n..two dots\n');
      expect(await dkimResult(got.raw)).toBe('pass');
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

/** The SMTP sessions every sender delivers over. */
describe('SmtpSessions', () => {
  const raw = (to: string) => Buffer.from(`From: a@sessions.test\r\nTo: ${to}\r\nSubject: hi\r\n\r\nHello ${to}.\r\n.leading dot\r\n`);
  const send = (sessions: SmtpSessions, to: string) => sessions.send({ from: 'a@sessions.test', to: [to] }, raw(to));

  test('more messages than sessions wait their turn, and every one arrives whole', async () => {
    const sessions = new SmtpSessions(smtp.url, 2);
    try {
      const outcomes = await Promise.all(Array.from({ length: 7 }, (_, i) => send(sessions, `u${i}@example.org`)));
      expect(outcomes.map((o) => o.kind)).toEqual(Array(7).fill('sent'));
      expect(smtp.received.map((r) => r.envelope.to[0]).sort()).toEqual(Array.from({ length: 7 }, (_, i) => `u${i}@example.org`));
      // Dot-stuffing is the connection's: a line starting with a dot arrives as written.
      expect(smtp.received[0].parsed.text).toContain('.leading dot');
    } finally {
      sessions.close();
    }
  });

  test('a refused message leaves its session usable for the next one', async () => {
    const sessions = new SmtpSessions(smtp.url, 1);
    try {
      smtp.reply = (rcpt) =>
        rcpt[0].startsWith('busy') ? { code: 451, message: 'try later' } : rcpt[0].startsWith('gone') ? { code: 550, message: 'no such user' } : 'accept';
      expect((await send(sessions, 'busy@example.org')).kind).toBe('retry');
      expect((await send(sessions, 'gone@example.org')).kind).toBe('failed');
      expect(await send(sessions, 'ok@example.org')).toMatchObject({ kind: 'sent', response: expect.stringMatching(/^250 /) });
      expect(smtp.received.map((r) => r.envelope.to[0])).toEqual(['ok@example.org']);
    } finally {
      sessions.close();
    }
  });

  test('sessions the server closed are replaced: the next message goes out on a new one', async () => {
    const sessions = new SmtpSessions(smtp.url, 2);
    try {
      expect((await send(sessions, 'before@example.org')).kind).toBe('sent');
      // The server ends its idle sessions: they are not used again.
      smtp.dropSessions();
      expect((await send(sessions, 'after@example.org')).kind).toBe('sent');
      expect(smtp.received.map((r) => r.envelope.to[0])).toEqual(['before@example.org', 'after@example.org']);
    } finally {
      sessions.close();
    }
  });

  test('a server shutting down (421 to an idle session) costs the message nothing: it goes out on a new session', async () => {
    const sessions = new SmtpSessions(smtp.url, 1);
    try {
      expect((await send(sessions, 'before@example.org')).kind).toBe('sent');
      // smtp-server answers 421 to idle sessions when it closes; a new one is let in once it is back.
      const stopping = smtp.stop();
      await new Promise((r) => setTimeout(r, 100));
      await smtp.start();
      expect((await send(sessions, 'after@example.org')).kind).toBe('sent');
      await stopping;
    } finally {
      sessions.close();
    }
  }, 60_000);

  test('a server that is down is reported unreachable, and sending resumes when it is back', async () => {
    const sessions = new SmtpSessions(smtp.url, 2);
    try {
      await smtp.stop();
      expect((await send(sessions, 'down@example.org')).kind).toBe('unreachable');
      await smtp.start();
      expect((await send(sessions, 'up@example.org')).kind).toBe('sent');
    } finally {
      sessions.close();
    }
  });
});
