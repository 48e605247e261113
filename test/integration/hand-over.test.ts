/**
 * Mail a request queues while a drain of its own process runs is claimed for that drain as it is
 * inserted and handed to it in memory (`DeliveryEngine.claimant`): no claim statement, nothing read
 * back. Delivered once; given back, for any drain to take, when the drain is cancelled before sending
 * it (its worker stops); and a drain never ends while a request it gave a claim to is still writing.
 */
import pino from 'pino';
import { createOrm, type Orm } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { QueueSignal } from '../../src/db/work-queue';
import { InProcessSender } from '../../src/delivery/delivery-threads';
import { Links } from '../../src/mail/links';
import { DeliveryEngine } from '../../src/delivery/delivery-engine';
import { deliveryPorts } from '../../src/engine-ports';
import { EMAIL_QUEUED_CHANNEL } from '../../src/modules/emails/emails.queries';
import { type LocalEmailQueue, sendEmails } from '../../src/modules/emails/emails.service';
import { createTestDatabase, dbQuery } from '../setup/db';
import { projectSendingFrom } from '../setup/sender';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

const log = pino({ level: 'silent' });
const links = new Links('https://mail.hand.test', 'hand-over test secret');
let url: string;
let orm: Orm;
let projectId: string;
let sink: SmtpSink;
let queue: QueueSignal;
let sender: InProcessSender;
let dispatcher: DeliveryEngine;
let local: LocalEmailQueue;

beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 6, log });
  projectId = await projectSendingFrom(orm, 'hand.test');
  sink = await new SmtpSink().start();
  queue = new QueueSignal(url, EMAIL_QUEUED_CHANNEL, log);
  await queue.start();
  sender = new InProcessSender(sink.url, 2, links);
  dispatcher = new DeliveryEngine({ orm, ports: deliveryPorts, sender, queue, log });
  local = {
    get draining() {
      return queue.draining;
    },
    queuedHere: () => queue.queuedHere(),
    claimant: () => dispatcher.claimant(),
  };
});
afterAll(async () => {
  await sender.close();
  await queue.stop();
  await sink.stop();
  await orm.close(true);
});
beforeEach(() => {
  sink.delayMs = 0;
});

const deps = () => ({ links, limits: { attachmentsMaxBytes: 1e6, messageMaxBytes: 2e6 }, queue: local });
const send = async (to: string) =>
  (await sendEmails(orm.em.fork(), projectId, { to, from: 'hello@hand.test', subject: 'Hi', body: '<p>hi</p>' }, deps())).emails[0].email;
const row = async (id: string) =>
  (
    await dbQuery<{ status: string; attempts: number; claimed_by: string | null; claimed: boolean }>(
      url,
      `SELECT status, attempts, claimed_by, claimed_until > now() AS claimed FROM emails WHERE id = $1`,
      [id],
    )
  )[0];
const receivedBy = (to: string) => sink.received.filter((m) => m.envelope.to.includes(to)).length;
const drain = (owner: string, signal?: AbortSignal) => dispatcher.drain({ idleMs: 800, maxMs: 30_000, heartbeat: () => {}, owner, signal });

test('while a drain runs, a send is committed already claimed for it, and each email is delivered once', async () => {
  sink.delayMs = 200;
  const running = drain('hand:1');
  await until(async () => queue.draining || undefined);
  const first = await send('first@example.org');
  // Committed claimed for the drain: no window in which another dispatcher could take it.
  expect(await row(first)).toEqual({ status: 'QUEUED', attempts: 1, claimed_by: 'hand:1', claimed: true });
  const more = await Promise.all(Array.from({ length: 12 }, (_, i) => send(`more${i}@example.org`)));
  const report = await running;
  expect(report.sent).toBe(13);
  for (const id of [first, ...more]) expect(await row(id)).toMatchObject({ status: 'SENT', attempts: 1 });
  expect(receivedBy('first@example.org')).toBe(1);
  for (let i = 0; i < 12; i++) expect(receivedBy(`more${i}@example.org`)).toBe(1);
});

test('mail handed to a drain that is cancelled before sending it (its worker stops) is given back, and another drain sends it once', async () => {
  sink.delayMs = 400;
  const stop = new AbortController();
  const running = drain('hand:2', stop.signal);
  await until(async () => queue.draining || undefined);
  const sending = await send('in-flight@example.org');
  await until(async () => ((await dbQuery(url, `SELECT 1 FROM emails WHERE id = $1`, [sending])).length ? true : undefined));
  const left = await send('left@example.org');
  stop.abort();
  await running;
  expect(await row(left)).toEqual({ status: 'QUEUED', attempts: 1, claimed_by: null, claimed: null });
  sink.delayMs = 0;
  await drain('hand:other');
  expect(await row(left)).toMatchObject({ status: 'SENT' });
  expect(receivedBy('left@example.org')).toBe(1);
  expect(await row(sending)).toMatchObject({ status: 'SENT' });
  expect(receivedBy('in-flight@example.org')).toBe(1);
});

test('a drain does not end while a request it gave a claim to is still writing', async () => {
  const running = drain('hand:3');
  await until(async () => queue.draining || undefined);
  const claimant = dispatcher.claimant()!;
  expect(claimant.owner).toBe('hand:3');
  let ended = false;
  void running.then(() => (ended = true));
  // Well past the drain's idle time: it waits for the writer.
  await new Promise((r) => setTimeout(r, 2000));
  expect(ended).toBe(false);
  claimant.handOver([]);
  await running;
  expect(ended).toBe(true);
});
