/**
 * How queued mail reaches a dispatcher: by a NOTIFY at commit, or, while a drain of the sending
 * process runs, by telling that drain after the commit (no NOTIFY: notifying commits are serialized).
 */
import pg from 'pg';
import pino from 'pino';
import { createOrm, type Orm, transaction } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { DrainBell, QueueSignal } from '../../src/db/work-queue';
import { Links } from '../../src/mail/links';
import { EMAIL_QUEUED_CHANNEL } from '../../src/modules/emails/emails.queries';
import { type LocalEmailQueue, sendEmails } from '../../src/modules/emails/emails.service';
import { createTestDatabase, dbQuery } from '../setup/db';
import { projectSendingFrom } from '../setup/sender';
import { until } from '../setup/until';

const log = pino({ level: 'silent' });
let url: string;
let orm: Orm;
let projectId: string;
let listener: pg.Client;
const notifications: string[] = [];

beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 4, log });
  projectId = await projectSendingFrom(orm, 'queue.test');
  listener = new pg.Client({ connectionString: url });
  await listener.connect();
  listener.on('notification', (n) => notifications.push(n.payload ?? ''));
  await listener.query(`LISTEN ${EMAIL_QUEUED_CHANNEL}`);
});
afterAll(async () => {
  await listener.end();
  await orm.close(true);
});
beforeEach(() => {
  notifications.length = 0;
});

const deps = { links: new Links('https://mail.queue.test', 'queue test secret'), limits: { attachmentsMaxBytes: 1e6, messageMaxBytes: 2e6 } };
const input = (to: string) => ({ to, from: 'hello@queue.test', subject: 'Queued', body: '<p>hi</p>' });
const queuedCount = async () => Number((await dbQuery<{ n: string }>(url, `SELECT count(*) AS n FROM emails WHERE status = 'QUEUED'`))[0].n);
/** A NOTIFY is delivered at once after its commit; a round trip on the listener's own connection lets it arrive. */
const settle = () => listener.query('SELECT 1');

/** A local queue whose drain is running (or not), recording what the email queue saw when it was told. */
function localQueue(draining: boolean) {
  const told: number[] = [];
  const queue: LocalEmailQueue = { draining, queuedHere: () => void queuedCount().then((n) => told.push(n)) };
  return { queue, told };
}

test('while a drain of this process runs, a send commits without a NOTIFY and tells it after the commit', async () => {
  const before = await queuedCount();
  const { queue, told } = localQueue(true);
  await sendEmails(orm.em.fork(), projectId, input('a@example.org'), { ...deps, queue });
  await until(async () => (told.length ? true : undefined));
  // Told once, when the email was already visible to every other connection.
  expect(told).toEqual([before + 1]);
  await settle();
  expect(notifications).toEqual([]);
});

test('without a running drain here, the transaction NOTIFYs the dispatchers and nothing is told', async () => {
  const { queue, told } = localQueue(false);
  await sendEmails(orm.em.fork(), projectId, input('b@example.org'), { ...deps, queue });
  await until(async () => (notifications.length ? true : undefined));
  expect(notifications).toEqual([projectId]);
  expect(told).toEqual([]);
});

test("inside a caller's transaction the NOTIFY stays in it: the commit is the caller's", async () => {
  const { queue, told } = localQueue(true);
  await transaction(orm.em.fork(), async (tx) => {
    await sendEmails(tx, projectId, input('c@example.org'), { ...deps, queue });
    await settle();
    expect(notifications).toEqual([]);
  });
  await until(async () => (notifications.length ? true : undefined));
  expect(notifications).toEqual([projectId]);
  expect(told).toEqual([]);
});

describe('QueueSignal told of work queued here', () => {
  let signal: QueueSignal;
  beforeAll(async () => {
    signal = new QueueSignal(url, 'local_queue_probe', log);
    await signal.start();
  });
  afterAll(() => signal.stop());

  test('wakes a drain waiting for work, or else the sleeping dispatchers', async () => {
    const idle: number[] = [];
    signal.onIdleNotification(() => idle.push(signal.sequence));
    expect(signal.draining).toBe(false);
    signal.queuedHere();
    expect(idle).toHaveLength(1);

    const stop = new AbortController();
    let rounds = 0;
    const drained = signal.drain({ idleMs: 120_000, maxMs: 120_000, heartbeat: () => {}, signal: stop.signal }, async () => {
      rounds++;
      expect(signal.draining).toBe(true);
      // The drain then waits for work (it polls only once a second); told of some, it looks again at once.
      if (rounds === 1) setImmediate(() => signal.queuedHere());
      if (rounds === 2) stop.abort();
      return 0;
    });
    // Its own wait: 60 s unless told, so this resolves only by the telling.
    const since = signal.sequence;
    const told = signal.wait(60_000, since);
    await Promise.all([drained, told]);
    expect(rounds).toBe(2);
    expect(signal.sequence).toBe(since + 1);
    // Told while a drain ran: the dispatchers asleep elsewhere were not woken for it.
    expect(idle).toHaveLength(1);
    expect(signal.draining).toBe(false);
  });

  test("a drain's bell wakes that drain alone; the process's telling wakes every drain", async () => {
    const stop = new AbortController();
    const bell = new DrainBell();
    const rounds = { rung: 0, other: 0 };
    // Each drain polls once a second when idle; everything below happens well within that.
    const drain = (name: keyof typeof rounds, own?: DrainBell) =>
      signal.drain({ idleMs: 120_000, maxMs: 120_000, heartbeat: () => {}, signal: stop.signal, bell: own }, async () => {
        rounds[name]++;
        return 0;
      });
    const drains = [drain('rung', bell), drain('other')];
    await until(async () => (rounds.rung === 1 && rounds.other === 1) || undefined);
    bell.ring();
    await until(async () => rounds.rung === 2 || undefined);
    await new Promise((r) => setTimeout(r, 100));
    expect(rounds).toEqual({ rung: 2, other: 1 });
    signal.queuedHere();
    await until(async () => (rounds.rung === 3 && rounds.other === 2) || undefined);
    stop.abort();
    await Promise.all(drains);
  });
});
