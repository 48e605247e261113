import crypto from 'node:crypto';
import { simpleParser } from 'mailparser';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dkimStatus } from '../setup/dkim';
import { relaxedBody, relaxedHeader } from '../../src/mail/dkim';
import { encodeMessage, mailbox, type OutgoingMessage } from '../../src/mail/mime';

let dns: ZoneDnsServer;
const keys = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const dkim = { domainName: 'shapes.test', keySelector: 'pb1', privateKey: keys.privateKey };

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  const publicKey = keys.publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  dns.add('pb1._domainkey.shapes.test', 'TXT', `v=DKIM1; k=rsa; p=${publicKey}`);
});
afterAll(() => dns.stop());

const dkimResult = async (raw: Buffer) => (await dkimStatus(raw, dns, 'hello@shapes.test')).result;

/** RFC 2047 Q-encoded UTF-8 words back to text (mailparser leaves unknown headers encoded). */
const decodeWords = (value: string) =>
  value.replace(/\?=\s+=\?/g, '?==?').replace(/=\?UTF-8\?Q\?(.*?)\?=/gi, (_w, q: string) =>
    Buffer.from(
      q.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
      'latin1',
    ).toString('utf8'),
  );

const base: OutgoingMessage = {
  messageId: '<0b6f3a1e@shapes.test>',
  from: { name: 'Shapes', address: 'hello@shapes.test' },
  to: { name: null, address: 'user@example.org' },
  replyTo: 'hello@shapes.test',
  subject: 'Hello',
  text: 'Hello there.',
  html: '<p>Hello there.</p>',
  headers: {},
  attachments: [],
};

const png = Buffer.from(
  '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5c2f5a90000000049454e44ae426082',
  'hex',
);

const shapes: Array<[string, Partial<OutgoingMessage>]> = [
  ['HTML and text', {}],
  ['HTML only', { text: null }],
  ['text only', { html: null, text: "Plain words, no HTML at all: a cron job's report. ✓" }],
  [
    'non-ASCII subject, names and body',
    {
      subject: 'Grüße aus Köln — 東京 📬',
      from: { name: 'Zoë Ünal', address: 'hello@shapes.test' },
      to: { name: '山田 太郎', address: 'user@example.org' },
      text: 'Grüße, 東京!',
      html: '<p>Grüße, 東京! ✓</p>',
    },
  ],
  [
    'long lines, trailing spaces, dots and blank lines',
    { text: `${'word '.repeat(300)}   \n.starts with a dot\n\n\n`, html: `<p>${'x'.repeat(2000)}</p>\n.\n<p>end</p>   ` },
  ],
  ['a long ASCII subject', { subject: 'A subject that goes on and on and on well past the seventy-eight characters a line should have' }],
  [
    'custom headers',
    {
      headers: {
        'X-Campaign': 'spring',
        'X-Entity-Ref-ID': 'ü-ref 42',
        'List-Unsubscribe': '<https://mail.example/unsubscribe/' + 'a'.repeat(120) + '>',
        'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
      },
    },
  ],
  [
    'attachments',
    {
      attachments: [
        { filename: 'report.pdf', contentType: 'application/pdf', content: crypto.randomBytes(5000), disposition: 'attachment', contentId: null },
        { filename: 'Übersicht 2026.csv', contentType: 'text/csv', content: Buffer.from('a,b\n1,2\n'), disposition: 'attachment', contentId: null },
      ],
    },
  ],
  [
    'inline images',
    {
      html: '<p><img src="cid:logo@shapes"></p>',
      attachments: [{ filename: 'logo.png', contentType: 'image/png', content: png, disposition: 'inline', contentId: 'logo@shapes' }],
    },
  ],
  [
    'inline images and attachments',
    {
      html: '<img src="cid:logo@shapes">',
      attachments: [
        { filename: 'logo.png', contentType: 'image/png', content: png, disposition: 'inline', contentId: 'logo@shapes' },
        { filename: 'a.txt', contentType: 'text/plain', content: Buffer.from('attached'), disposition: 'attachment', contentId: null },
      ],
    },
  ],
];

describe('messages built by encodeMessage', () => {
  test.each(shapes)('%s: DKIM verifies, and a reader sees what was sent', async (_name, over) => {
    const m = { ...base, ...over };
    const { raw, envelope } = await encodeMessage(m, dkim);
    expect(envelope).toEqual({ from: 'hello@shapes.test', to: ['user@example.org'] });
    expect(await dkimResult(raw)).toBe('pass');
    for (const line of raw.toString('latin1').split('\r\n')) expect(line.length).toBeLessThanOrEqual(998);

    const parsed = await simpleParser(raw, { keepCidLinks: true });
    expect(parsed.subject).toBe(m.subject);
    expect(parsed.messageId).toBe(m.messageId);
    expect((parsed.from as any).value[0]).toEqual({ name: m.from.name ?? '', address: m.from.address });
    expect((parsed.to as any).value[0]).toEqual({ name: m.to.name ?? '', address: m.to.address });
    expect(parsed.html || null).toBe(m.html === null ? null : m.html.replace(/\r?\n/g, '\n'));
    if (m.text !== null) expect(parsed.text?.replace(/\r\n/g, '\n').trimEnd()).toBe(m.text.trimEnd());
    for (const [name, value] of Object.entries(m.headers)) {
      const got = parsed.headerLines.find((h) => h.key === name.toLowerCase());
      expect(got).toBeDefined();
      if (!name.startsWith('List-')) expect(decodeWords(parsed.headers.get(name.toLowerCase()) as string)).toBe(value);
    }
    expect(parsed.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content, cid: a.cid ?? null }))).toEqual(
      m.attachments.map((a) => ({ filename: a.filename, contentType: a.contentType, content: a.content, cid: a.contentId })),
    );
  });

  test('a changed body or signed header fails verification', async () => {
    const { raw } = await encodeMessage(base, dkim);
    expect(await dkimStatus(Buffer.from(raw.toString().replace('Hello there.', 'Hello thera.')), dns, 'hello@shapes.test')).toMatchObject({
      result: 'neutral',
      comment: 'body hash did not verify',
    });
    expect(await dkimResult(Buffer.from(raw.toString().replace('Subject: Hello', 'Subject: Hellp')))).toBe('fail');
  });

  test('a name or header value holding CR or LF is encoded, never a line of its own (a second From:)', async () => {
    const smuggled = 'a\r\nFrom: ceo@bank.test';
    const { raw } = await encodeMessage({
      ...base,
      to: { name: smuggled, address: 'user@example.org' },
      subject: smuggled,
      headers: { 'X-Note': smuggled, Cc: mailbox({ name: smuggled, address: 'cc@example.org' }) },
    });
    const head = raw.toString().split('\r\n\r\n')[0];
    expect(head.split('\r\n').filter((l) => /^from:/i.test(l))).toEqual(['From: "Shapes" <hello@shapes.test>']);
    expect(head).not.toMatch(/[^\r]\n|\r(?!\n)/);
    const parsed = await simpleParser(raw);
    expect(parsed.subject).toBe(smuggled);
    expect(parsed.cc).toMatchObject({ value: [{ name: smuggled, address: 'cc@example.org' }] });
  });

  test('without a key, nothing is signed', async () => {
    expect((await encodeMessage(base)).raw.toString()).not.toMatch(/DKIM-Signature/i);
  });
});

describe('relaxed canonicalization (RFC 6376 §3.4.5 example)', () => {
  test('header', () => {
    expect(relaxedHeader('A', ' X')).toBe('a:X\r\n');
    expect(relaxedHeader('B ', ' Y\t\r\n\tZ  ')).toBe('b:Y Z\r\n');
  });
  test('body', () => {
    expect(relaxedBody(' C \r\nD \t E\r\n\r\n\r\n')).toBe(' C\r\nD E\r\n');
    expect(relaxedBody('')).toBe('');
    expect(relaxedBody('\r\n\r\n')).toBe('');
    expect(relaxedBody('no newline  ')).toBe('no newline\r\n');
  });
});
