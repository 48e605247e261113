/** Reading received mail for storage: addresses, unfolded headers, the Message-IDs it answers, and nothing PostgreSQL refuses. */
import { readReceivedMessage } from '../../src/inbound/received-message';
import { inboundHostDomain } from '../../src/modules/inbound-emails';

const read = (lines: string[]) => readReceivedMessage(Buffer.from(lines.join('\r\n'), 'latin1'));

test('the inbound host of a sender domain, and nothing else', () => {
  expect(inboundHostDomain('support@inbound.Acme.com')).toBe('acme.com');
  expect(inboundHostDomain('a@inbound.mail.acme.co.uk')).toBe('mail.acme.co.uk');
  expect(inboundHostDomain('a@acme.com')).toBeUndefined();
  expect(inboundHostDomain('a@inbound.com')).toBeUndefined();
  expect(inboundHostDomain('a@notinbound.acme.com')).toBeUndefined();
  expect(inboundHostDomain('inbound.acme.com')).toBeUndefined();
});

test('addresses lower-cased (groups opened), headers unfolded, In-Reply-To first then References newest first', async () => {
  const m = await read([
    'From: "Ann" <Ann@Example.ORG>',
    'To: team: a@x.test, B@x.test;, c@x.test',
    'Subject: a long',
    '  folded subject',
    'In-Reply-To: <r3@acme.test>',
    'References: <r1@acme.test> <r2@acme.test>',
    '\t<r3@acme.test>',
    'Message-ID: <m1@example.org>',
    '',
    'body',
  ]);
  expect(m.from).toBe('ann@example.org');
  expect(m.to).toEqual(['a@x.test', 'b@x.test', 'c@x.test']);
  expect(m.subject).toBe('a long folded subject');
  expect(m.headers).toContainEqual({ name: 'Subject', value: 'a long  folded subject' });
  expect(m.answers).toEqual(['<r3@acme.test>', '<r2@acme.test>', '<r1@acme.test>']);
  expect(m.messageId).toBe('<m1@example.org>');
});

test('NUL and lone surrogates never reach what is stored', async () => {
  const m = await read([
    'From: x\u0000@example.org',
    'Subject: =?utf-8?B?' + Buffer.from('a\u0000b').toString('base64') + '?=',
    'X-Odd: v\u0000w',
    'Content-Type: text/html; charset=utf-16le',
    'Content-Transfer-Encoding: base64',
    '',
    Buffer.from([0x3c, 0x00, 0x62, 0x00, 0x00, 0xd8, 0x3e, 0x00, 0x00, 0x00]).toString('base64'),
  ]);
  const all = JSON.stringify(m);
  expect(all).not.toContain('\\u0000');
  expect(m.subject).toBe('ab');
  expect(m.headers).toContainEqual({ name: 'X-Odd', value: 'vw' });
  expect(m.html!.isWellFormed()).toBe(true);
});
