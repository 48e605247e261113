import { createLogger } from '../../src/log';
import { SmtpReply } from '../../src/mail/smtp-listener';
import { ConnectionGate } from '../../src/net/connection-limits';
import { type MxHandler, type MxOptions, startMxListener } from '../../src/inbound/mx-listener';
import { SmtpDialog } from '../setup/smtp-client';
import { until } from '../setup/until';

// The MX's own rules (who it takes mail for, limits, deadlines, faults); what a report does is tested
// with the whole service in bounces.test.ts.
const log = createLogger('silent');
const received: Array<{ to: string[]; size: number }> = [];
let fail: unknown;
const handler: MxHandler = {
  accepts: (address) => address.endsWith('@bounces.acme.test'),
  receive: async (envelope, raw) => {
    if (fail) throw fail;
    received.push({ to: envelope.to, size: raw.length });
  },
};
const options = (o: Partial<MxOptions> = {}): MxOptions => ({
  host: '127.0.0.1',
  port: 0,
  maxBytes: 64 * 1024,
  timeoutSeconds: 30,
  dataTimeoutSeconds: 30,
  sessionTimeoutSeconds: 60,
  maxMessagesPerSession: 20,
  bufferBytes: 10 * 2 ** 20,
  reportsPerClientPerHour: 1000,
  gate: new ConnectionGate('inbound', { max: 50, perClient: 50 }, log),
  log,
  ...o,
});

async function session(port: number) {
  const { dialog, greeting } = await SmtpDialog.open(port);
  expect(greeting).toMatch(/^220 /);
  expect(await dialog.command('EHLO mta.test')).toMatch(/^250/);
  return dialog;
}

test('takes mail for its own addresses only, never relays, and answers 250 once the handler is done', async () => {
  const mx = await startMxListener(options(), handler);
  try {
    const dialog = await session(mx.port);
    expect(await dialog.command('MAIL FROM:<>')).toMatch(/^250 /);
    expect(await dialog.command('RCPT TO:<someone@example.org>')).toMatch(/^550 5\.1\.1 /);
    expect(await dialog.command('RCPT TO:<b1@bounces.acme.test>')).toMatch(/^250 /);
    expect(await dialog.data('Subject: report\n\nbody\n')).toMatch(/^250 2\.0\.0 OK/);
    expect(received.at(-1)).toMatchObject({ to: ['b1@bounces.acme.test'] });
    dialog.close();
  } finally {
    await mx.close();
  }
});

test('a message over the size limit is 552; a fault of ours is 451 (send again); a refusal of the handler stands', async () => {
  const mx = await startMxListener(options({ maxBytes: 1024 }), handler);
  try {
    const dialog = await session(mx.port);
    const send = async (body: string) => {
      await dialog.command('MAIL FROM:<>');
      await dialog.command('RCPT TO:<b1@bounces.acme.test>');
      return dialog.data(body);
    };
    expect(await send(`Subject: big\n\n${'x'.repeat(5000)}\n`)).toMatch(/^552 5\.3\.4 /);
    fail = new Error('the database is away');
    expect(await send('Subject: s\n\nbody\n')).toMatch(/^451 4\.3\.0 /);
    fail = new SmtpReply(554, '5.6.0 not a report');
    expect(await send('Subject: s\n\nbody\n')).toMatch(/^554 5\.6\.0 /);
    fail = undefined;
    expect(await send('Subject: s\n\nbody\n')).toMatch(/^250 /);
    dialog.close();
  } finally {
    fail = undefined;
    await mx.close();
  }
});

/** Keeps a connection busy with NOOP until the MX's deadline answers 421 4.4.2 and closes it. */
async function expectClosedWhileIdling(dialog: SmtpDialog): Promise<void> {
  let reply = '250';
  for (let i = 0; i < 20 && reply.startsWith('250'); i++) {
    reply = await dialog.command('NOOP');
    await new Promise((r) => setTimeout(r, 200));
  }
  expect(reply).toMatch(/^421 4\.4\.2 /);
  await until(async () => (dialog.closed ? true : undefined), 5_000, 'closed');
}

test('a connection that has not reached DATA within the deadline is closed, however busy it keeps itself', async () => {
  const mx = await startMxListener(options({ timeoutSeconds: 1 }), handler);
  try {
    const dialog = await session(mx.port);
    await expectClosedWhileIdling(dialog);
  } finally {
    await mx.close();
  }
});

test('past its connections per client address it answers 421 and closes', async () => {
  const mx = await startMxListener(options({ gate: new ConnectionGate('inbound', { max: 10, perClient: 2 }, log) }), handler);
  try {
    const held = await Promise.all([1, 2].map(() => SmtpDialog.open(mx.port)));
    const third = await SmtpDialog.open(mx.port);
    expect(third.greeting).toMatch(/^421 4\.7\.0 /);
    for (const h of held) h.dialog.close();
  } finally {
    await mx.close();
  }
});

/** Sends one whole message on an open dialog; answers the reply to its final dot. */
async function message(dialog: SmtpDialog, body = 'Subject: report\n\nbody\n'): Promise<string> {
  await dialog.command('MAIL FROM:<>');
  await dialog.command('RCPT TO:<b1@bounces.acme.test>');
  return dialog.data(body);
}

/** Writes without waiting for a reply (part of a message's DATA). */
const write = (dialog: SmtpDialog, text: string) => (dialog as unknown as { socket: { write(s: string): void } }).socket.write(text);

test('after a message the deadline to reach DATA starts again: a connection idling on NOOP is closed', async () => {
  const mx = await startMxListener(options({ timeoutSeconds: 1 }), handler);
  try {
    const dialog = await session(mx.port);
    expect(await message(dialog)).toMatch(/^250 /);
    await expectClosedWhileIdling(dialog);
  } finally {
    await mx.close();
  }
});

test('DATA that does not end within its deadline is 421 and closed; so is a session past its own', async () => {
  const mx = await startMxListener(options({ dataTimeoutSeconds: 1 }), handler);
  try {
    const dialog = await session(mx.port);
    await dialog.command('MAIL FROM:<>');
    await dialog.command('RCPT TO:<b1@bounces.acme.test>');
    expect(await dialog.command('DATA')).toMatch(/^354/);
    // A line at a time, never the final dot: the next reply is the deadline's.
    let reply = '';
    for (let i = 0; i < 20 && !reply; i++) {
      write(dialog, 'X-Slow: one more header\r\n');
      reply = await Promise.race([dialog.command('X-Slow: and another'), new Promise<string>((r) => setTimeout(() => r(''), 300))]);
    }
    expect(reply).toMatch(/^421 4\.4\.2 DATA /);
    await until(async () => (dialog.closed ? true : undefined), 5_000, 'closed');
  } finally {
    await mx.close();
  }
  const whole = await startMxListener(options({ sessionTimeoutSeconds: 1 }), handler);
  try {
    const dialog = await session(whole.port);
    let reply = await message(dialog);
    for (let i = 0; i < 20 && reply.startsWith('250'); i++) {
      reply = await dialog.command('NOOP');
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(reply).toMatch(/^421 4\.4\.2 Session /);
  } finally {
    await whole.close();
  }
});

test('a connection sends at most its messages; the next MAIL FROM is 421 and it is closed', async () => {
  const mx = await startMxListener(options({ maxMessagesPerSession: 2 }), handler);
  try {
    const dialog = await session(mx.port);
    expect(await message(dialog)).toMatch(/^250 /);
    expect(await message(dialog)).toMatch(/^250 /);
    expect(await dialog.command('MAIL FROM:<>')).toMatch(/^421 4\.7\.0 /);
    await until(async () => (dialog.closed ? true : undefined), 5_000, 'closed');
  } finally {
    await mx.close();
  }
});

test('unfinished messages together hold at most the buffer; one that would pass it is 452, and the memory is given back', async () => {
  const mx = await startMxListener(options({ maxBytes: 1024 * 1024, bufferBytes: 100 * 1024 }), handler);
  try {
    const slow = await session(mx.port);
    await slow.command('MAIL FROM:<>');
    await slow.command('RCPT TO:<b1@bounces.acme.test>');
    expect(await slow.command('DATA')).toMatch(/^354/);
    write(slow, `Subject: slow\r\n\r\n${'x'.repeat(76)}\r\n`.repeat(1000));
    await until(async () => (mx.buffered >= 70_000 ? true : undefined), 5_000, 'the slow message held');

    const other = await session(mx.port);
    expect(await message(other, `Subject: big\n\n${'y'.repeat(76)}\n`.repeat(600))).toMatch(/^452 4\.3\.1 /);
    expect(mx.buffered).toBeLessThanOrEqual(100 * 1024);
    // The slow one ends, and is taken; then nothing is held.
    expect(await slow.command('.')).toMatch(/^250 /);
    expect(mx.buffered).toBe(0);
    // With the buffer free again, the refused message goes through.
    expect(await message(other, `Subject: big\n\n${'y'.repeat(76)}\n`.repeat(600))).toMatch(/^250 /);
    slow.close();
    other.close();
  } finally {
    await mx.close();
  }
});

test('one client address sends at most its messages an hour, over any number of connections; then MAIL FROM is 450', async () => {
  const mx = await startMxListener(options({ reportsPerClientPerHour: 3 }), handler);
  try {
    const first = await session(mx.port);
    expect(await message(first)).toMatch(/^250 /);
    expect(await message(first)).toMatch(/^250 /);
    first.close();
    const second = await session(mx.port);
    expect(await message(second)).toMatch(/^250 /);
    expect(await second.command('MAIL FROM:<>')).toMatch(/^450 4\.7\.1 /);
    second.close();
  } finally {
    await mx.close();
  }
});
