import fs from 'node:fs';
import path from 'node:path';
import { parseInboundReport } from '../../src/inbound/bounce-report';
import { classifySmtpReply } from '../../src/mail/smtp-replies';

/** sisimai's own verdict for each recipient, transcribed from its public test tables (see fixtures/bounces/README.md). */
interface SisimaiExpectation {
  status: string;
  replyCode: string;
  reason: string;
  hard: boolean;
  feedbackType?: string;
}

const fixtures = path.join(__dirname, '../fixtures/bounces');
const expected: Record<string, SisimaiExpectation[]> = JSON.parse(fs.readFileSync(path.join(fixtures, 'expected.json'), 'utf8'));
const read = (file: string) => fs.readFileSync(path.join(fixtures, file));

/** Reports that say the message is still being retried (read by hand; sisimai gives them a reason but no kind). */
const DELAY_WARNINGS = new Set([
  'lhost-exim-38.eml',
  'lhost-outlook-06.eml',
  'lhost-gmail-06.eml',
  'lhost-gmail-08.eml',
  'lhost-gmail-09.eml',
  'lhost-gmail-17.eml',
  'lhost-messagingserver-07.eml',
  'rfc3464-07.eml',
  'rfc3464-09.eml',
  'rfc3464-34.eml',
]);

/** sisimai's reasons that are not bounces map to our kinds; everything else is a bounce (or a delay warning). */
function expectedKind(file: string, list: SisimaiExpectation[]) {
  if (list.every((e) => e.reason === 'feedback')) return 'complaint';
  if (list.every((e) => e.reason === 'vacation')) return 'auto-reply';
  if (list.every((e) => e.reason === 'delivered')) return 'unknown';
  return DELAY_WARNINGS.has(file) ? 'delay' : 'bounce';
}

/** sisimai writes pseudo codes (X.0.9NN) for reasons it found in text; only codes a server could have sent are compared. */
const isStandardStatus = (status: string) => /^[245]\.\d{1,3}\.\d{1,3}$/.test(status) && !/^[245]\.0\.9\d\d$/.test(status);

describe('the sisimai corpus', () => {
  test('has fixtures', () => expect(Object.keys(expected).length).toBeGreaterThan(150));

  test.each(Object.entries(expected))('%s agrees with sisimai', async (file, list) => {
    const report = await parseInboundReport(read(file));
    expect(report.kind).toBe(expectedKind(file, list));

    if (report.kind === 'complaint') {
      expect(report.feedbackType).toBe(list[0].feedbackType);
      expect(report.recipients).toHaveLength(list.length);
      return;
    }
    if (report.kind !== 'bounce' && report.kind !== 'delay') return;

    expect(report.recipients.map((r) => r.reason)).toEqual(list.map((e) => e.reason));
    expect(report.recipients.map((r) => r.bounceType)).toEqual(
      list.map((e) => (e.hard ? 'Permanent' : e.reason === 'onhold' || e.reason === 'undefined' ? 'Undetermined' : 'Transient')),
    );
    list.forEach((e, i) => {
      if (isStandardStatus(e.status)) expect(report.recipients[i].status).toBe(e.status);
    });
    for (const r of report.recipients) {
      expect(r.recipient).toMatch(/^[^\sA-Z]+@[^\sA-Z]+$/);
      expect(r.diagnosticCode?.length ?? 0).toBeLessThanOrEqual(1000);
    }
    if (report.kind === 'delay') expect(report.recipients.every((r) => r.action === 'delayed')).toBe(true);
  });
});

describe('the returned original', () => {
  test.each([
    ['lhost-gmail-01.eml', '<D992C2C3-F175-4C4D-97E2-53A90E4E5BF5@gmail.com>'],
    ['lhost-qmail-01.eml', '<000000000.9999999999999.JavaMail.postmaster@mailhub>'],
    ['arf-16.eml', '<ffffffffffffffffffffffff0000000@example.jp>'],
    ['arf-22.eml', '<0000000000fffffffff0000000000000@example.com>'],
  ])('%s names the Message-ID of the message it reports on', async (file, messageId) => {
    const report = await parseInboundReport(read(file));
    expect(report.kind === 'unknown' ? null : report.original.messageId).toBe(messageId);
  });

  test('a bounce names the envelope sender it was returned to', async () => {
    const report = await parseInboundReport(read('lhost-postfix-01.eml'));
    expect(report.kind === 'bounce' && report.original.returnPath).toBe('shironeko@mx.example.jp');
  });
});

const dsn = (action: string, status: string, diagnostic: string) =>
  Buffer.from(
    [
      'From: MAILER-DAEMON@mx.example.net',
      'To: bounces+abc@postbox.example',
      'Subject: Delivery Status Notification',
      'MIME-Version: 1.0',
      'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain',
      '',
      'Your message has not been delivered yet. We will keep trying.',
      '--b1',
      'Content-Type: message/delivery-status',
      '',
      'Reporting-MTA: dns; mx.example.net',
      '',
      'Final-Recipient: rfc822; Someone@Example.ORG',
      `Action: ${action}`,
      `Status: ${status}`,
      'Remote-MTA: dns; mx1.example.org',
      `Diagnostic-Code: smtp; ${diagnostic}`,
      '--b1',
      'Content-Type: text/rfc822-headers',
      '',
      'Return-Path: <bounces+abc@postbox.example>',
      'Message-ID: <m1@postbox.example>',
      'From: hello@postbox.example',
      'To: someone@example.org',
      '--b1--',
      '',
    ].join('\r\n'),
  );

describe('delivery-status reports', () => {
  test('Action: delayed is a delay, never a bounce', async () => {
    const report = await parseInboundReport(dsn('delayed', '4.4.1', '421 4.4.1 Connection timed out'));
    expect(report).toMatchObject({
      kind: 'delay',
      reportingMta: 'mx.example.net',
      recipients: [
        { recipient: 'someone@example.org', action: 'delayed', status: '4.4.1', replyCode: '421', remoteMta: 'mx1.example.org', bounceType: 'Transient' },
      ],
      original: { messageId: '<m1@postbox.example>', returnPath: 'bounces+abc@postbox.example', from: 'hello@postbox.example', to: 'someone@example.org' },
    });
  });

  test('a refusal of our envelope sender (in reply to MAIL FROM) is rejected, not the recipient unknown', async () => {
    const report = await parseInboundReport(
      dsn(
        'failed',
        '5.1.0',
        '550 5.1.0 <bounces+abc@postbox.example>: Sender address rejected: User unknown in local recipient table (in reply to MAIL FROM command)',
      ),
    );
    expect(report).toMatchObject({ kind: 'bounce', recipients: [{ reason: 'rejected', bounceType: 'Transient' }] });
  });

  test('Action: failed with 5.1.1 is a permanent bounce with no such mailbox', async () => {
    const report = await parseInboundReport(dsn('failed', '5.1.1', '550 5.1.1 <someone@example.org>: Recipient address rejected: User unknown'));
    expect(report).toMatchObject({
      kind: 'bounce',
      recipients: [{ reason: 'userunknown', bounceType: 'Permanent', subType: 'NoEmail', status: '5.1.1', replyCode: '550' }],
    });
  });
});

describe('classifySmtpReply', () => {
  test.each([
    [550, '5.1.1 <x@y>: Recipient address rejected: User unknown', 'userunknown', 'Permanent', 'NoEmail', '5.1.1'],
    [552, '5.2.2 Mailbox full', 'mailboxfull', 'Transient', 'MailboxFull', '5.2.2'],
    [550, '5.7.1 Message rejected as spam by Content Filtering', 'spamdetected', 'Transient', 'ContentRejected', '5.7.1'],
    [421, '4.7.0 try again later', 'securityerror', 'Transient', 'General', '4.7.0'],
    [552, '5.3.4 Message size exceeds fixed limit', 'mesgtoobig', 'Transient', 'MessageTooLarge', '5.3.4'],
    [554, '5.7.1 Service unavailable; Client host [192.0.2.1] blocked using zen.spamhaus.org', 'blocked', 'Transient', 'General', '5.7.1'],
    [550, '5.1.2 Host unknown: domain does not exist', 'hostunknown', 'Permanent', 'NoEmail', '5.1.2'],
    [450, '4.1.1 <x@y>: Recipient address rejected: User unknown in local recipient table', 'userunknown', 'Transient', 'NoEmail', '4.1.1'],
  ])('%i %s', (code, text, reason, bounceType, subType, status) => {
    expect(classifySmtpReply(code, `${code} ${text}`)).toEqual({ reason, bounceType, subType, status });
  });

  test.each([
    [550, '5.1.0 <hi@acme.test>: Sender address rejected: User unknown in local recipient table'],
    [553, '5.1.8 <b01@bounces.acme.test>: Sender address rejected: Domain not found'],
    [550, '5.1.1 Mailbox does not exist'],
  ])("%i %s at MAIL FROM is about our sender: rejected, never a recipient's hard bounce", (code, text) => {
    expect(classifySmtpReply(code, `${code} ${text}`, 'MAIL')).toMatchObject({ reason: 'rejected', bounceType: 'Transient' });
  });

  test('nonsense is undetermined, not an exception', () => {
    expect(classifySmtpReply(Number.NaN, '')).toMatchObject({ reason: 'undefined', bounceType: 'Undetermined', status: null });
  });
});

describe('hostile input', () => {
  const nested = () => {
    let text = 'From: a@b.example\r\nContent-Type: multipart/mixed; boundary="b0"\r\n\r\n';
    for (let i = 1; i < 5000; i += 1) text += `--b${i - 1}\r\nContent-Type: multipart/mixed; boundary="b${i}"\r\n\r\n`;
    return Buffer.from(text);
  };
  test.each([
    ['empty input', () => Buffer.alloc(0)],
    ['a 2 MB line in a bounce', () => Buffer.from(`From: MAILER-DAEMON@x.example\r\nSubject: Undelivered Mail\r\n\r\n${'a@'.repeat(1024 * 1024)}`)],
    ['a 2 MB header line', () => Buffer.from(`X-Long: ${'<'.repeat(2 * 1024 * 1024)}\r\n\r\nbody`)],
    ['5,000 nested multiparts', nested],
    ['NUL bytes', () => Buffer.from('\0\0\0From: \0MAILER-DAEMON\0\r\n\r\n\0'.repeat(1000))],
    ['binary noise', () => Buffer.from(Array.from({ length: 300_000 }, (_v, i) => (i * 7919) % 256))],
  ])('%s: unknown, quickly, without throwing', async (_name, make) => {
    const started = Date.now();
    const report = await parseInboundReport(make());
    expect(report.kind).toBe('unknown');
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
