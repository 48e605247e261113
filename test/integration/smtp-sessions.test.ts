import { SmtpSessions } from '../../src/mail/transport';
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
    smtp.reply = (rcpt) => (rcpt[0].startsWith('busy') ? { code: 451, message: 'try later' } : rcpt[0].startsWith('gone') ? { code: 550, message: 'no such user' } : 'accept');
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
