/**
 * The common /v1/send in one statement (`queueSends`): all of it or nothing, and nothing when a
 * recipient changed since the send read them, so the caller can take the locking transaction; and
 * concurrent sends written together (`SendBatcher`), each still all or nothing by itself.
 */
import pino from 'pino';
import { createOrm, type Orm } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { newId } from '../../src/db/ids';
import { Links } from '../../src/mail/links';
import { isForeignKeyViolation } from '../../src/db/orm';
import { type QueuedSend, queueSends } from '../../src/modules/emails/emails.queries';
import { type QueuedEmailInput, SendBatcher, sendEmails } from '../../src/modules/emails/emails.service';
import { createTestDatabase, dbQuery } from '../setup/db';
import { projectSendingFrom } from '../setup/sender';

let url: string;
let orm: Orm;
let projectId: string;

beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 8, log: pino({ level: 'silent' }) });
  projectId = await projectSendingFrom(orm, 'one.test');
});
afterAll(async () => {
  await orm.close(true);
});

const email = (contactId: string, to: string): QueuedEmailInput => ({
  id: newId(),
  projectId,
  contactId,
  templateId: null,
  type: 'TRANSACTIONAL',
  from: { email: 'hello@one.test', name: 'One' },
  replyTo: 'hello@one.test',
  to: { email: to, name: null },
  message: { subject: 'Hi', html: '<p>hi</p>', text: 'hi', headers: { 'X-Test': '1' } },
});
const contact = async (to: string) =>
  (
    await dbQuery<{ id: string; subscribed: boolean; data: Record<string, unknown> }>(
      url,
      `SELECT id, subscribed, data FROM contacts WHERE project_id = $1 AND email = $2`,
      [projectId, to],
    )
  )[0];
const insertContact = async (to: string, data: Record<string, unknown>) => {
  const id = newId();
  await dbQuery(url, `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at) VALUES ($1, $2, $3, true, $4, now(), now())`, [
    id,
    projectId,
    to,
    JSON.stringify(data),
  ]);
  return id;
};
const emailsTo = async (to: string) =>
  dbQuery<{ id: string; contact_id: string; status: string; message_id: string; headers: Record<string, string> }>(
    url,
    `SELECT id, contact_id, status, message_id, headers FROM emails WHERE project_id = $1 AND to_email = $2`,
    [projectId, to],
  );
const data = { set: { plan: 'pro' }, unset: ['old'] };
const send = (emails: QueuedEmailInput[], known: string[] = [], more: Partial<QueuedSend> = {}): QueuedSend => ({
  emails,
  created: { known: new Set(known), subscribed: false, data },
  notify: false,
  ...more,
});
/** Resolves to the foreign-key violation a refused statement throws. */
const refused = (p: Promise<unknown>) =>
  p.then(
    () => 'written',
    (err) => (isForeignKeyViolation(err) ? 'refused' : err),
  );
/** The transaction that inserted each email (rows one statement wrote share it). */
const writtenBy = async (ids: string[]) =>
  (await dbQuery<{ id: string; xmin: string }>(url, `SELECT id, xmin::text FROM emails WHERE id = ANY($1)`, [ids])).reduce<Record<string, string>>(
    (m, r) => ({ ...m, [r.id]: r.xmin }),
    {},
  );

test("a new recipient is created with the send's data and a known one gets it merged; both emails are queued", async () => {
  const knownId = await insertContact('known@example.org', { old: 1, keep: 2 });
  const fresh = newId();
  const sent = [email(fresh, 'new@example.org'), email(knownId, 'known@example.org')];
  await queueSends(orm.em.fork(), [send(sent, [knownId])]);
  expect(await contact('new@example.org')).toEqual({ id: fresh, subscribed: false, data: { plan: 'pro' } });
  expect(await contact('known@example.org')).toEqual({ id: knownId, subscribed: true, data: { keep: 2, plan: 'pro' } });
  const [queued] = await emailsTo('new@example.org');
  expect(queued).toMatchObject({ id: sent[0].id, contact_id: fresh, status: 'QUEUED', message_id: `<${sent[0].id}@one.test>`, headers: { 'X-Test': '1' } });
  expect(await emailsTo('known@example.org')).toHaveLength(1);
});

test('a recipient someone else made a contact since the read: nothing at all is written, and the caller is told', async () => {
  const theirs = await insertContact('raced@example.org', { theirs: true });
  const sent = [email(newId(), 'other-new@example.org'), email(newId(), 'raced@example.org')];
  expect(await refused(queueSends(orm.em.fork(), [send(sent)]))).toBe('refused');
  expect(await contact('other-new@example.org')).toBeUndefined();
  expect(await contact('raced@example.org')).toEqual({ id: theirs, subscribed: true, data: { theirs: true } });
  expect(await emailsTo('other-new@example.org')).toEqual([]);
  expect(await emailsTo('raced@example.org')).toEqual([]);
});

test('a known recipient deleted since the read: nothing is written either', async () => {
  const gone = await insertContact('gone@example.org', {});
  await dbQuery(url, `DELETE FROM contacts WHERE id = $1`, [gone]);
  expect(await refused(queueSends(orm.em.fork(), [send([email(gone, 'gone@example.org')], [gone])]))).toBe('refused');
  expect(await emailsTo('gone@example.org')).toEqual([]);
});

test('sends queued while a statement runs are written by the next one, together, each with its own key and claim', async () => {
  const keys = ['batch-key-1', 'batch-key-2', 'batch-key-3'];
  for (const key of keys) {
    await dbQuery(url, `INSERT INTO idempotency_keys (project_id, key, request, created_at) VALUES ($1, $2, 'r', now())`, [projectId, key]);
  }
  const batcher = new SendBatcher(orm, 100, 1);
  const sends = [
    send([email(newId(), 'lead@example.org')]),
    send([email(newId(), 'b1@example.org'), email(newId(), 'b2@example.org')], [], { idempotency: { key: keys[0], response: { n: 1 } }, claimedBy: 'drain-a' }),
    send([email(newId(), 'b3@example.org')], [], { idempotency: { key: keys[1], response: { n: 2 } } }),
    send([email(newId(), 'b4@example.org')], [], { idempotency: { key: keys[2], response: { n: 3 } }, claimedBy: 'drain-b' }),
  ];
  // The first takes the only slot; the other three wait for it and go as one statement.
  await Promise.all(sends.map((s) => batcher.write(s)));
  const ids = sends.flatMap((s) => s.emails.map((e) => e.id));
  const by = await writtenBy(ids);
  expect(new Set(ids.slice(1).map((id) => by[id])).size).toBe(1);
  expect(by[ids[0]]).not.toBe(by[ids[1]]);
  const rows = await dbQuery<{ id: string; claimed_by: string | null; attempts: number; claimed: boolean }>(
    url,
    `SELECT id, claimed_by, attempts, claimed_until > now() AS claimed FROM emails WHERE id = ANY($1)`,
    [ids],
  );
  const claims = Object.fromEntries(rows.map((r) => [r.id, [r.claimed_by, r.attempts, r.claimed]]));
  expect(ids.map((id) => claims[id])).toEqual([
    [null, 0, null],
    ['drain-a', 1, true],
    ['drain-a', 1, true],
    [null, 0, null],
    ['drain-b', 1, true],
  ]);
  const marked = await dbQuery(url, `SELECT key, status_code, response FROM idempotency_keys WHERE project_id = $1 AND key = ANY($2) ORDER BY key`, [
    projectId,
    keys,
  ]);
  expect(marked).toEqual(keys.map((key, i) => ({ key, status_code: 200, response: { n: i + 1 } })));
});

test('a send of a batch whose recipient changed since the read is refused alone; the others are written', async () => {
  const theirs = await insertContact('raced-in-batch@example.org', {});
  const batcher = new SendBatcher(orm, 100, 1);
  const sends = [
    send([email(newId(), 'lead-2@example.org')]),
    send([email(newId(), 'fine-1@example.org')]),
    send([email(newId(), 'raced-in-batch@example.org')]),
    send([email(newId(), 'fine-2@example.org')]),
  ];
  expect(await Promise.all(sends.map((s) => refused(batcher.write(s))))).toEqual(['written', 'written', 'refused', 'written']);
  expect((await contact('raced-in-batch@example.org')).id).toBe(theirs);
  expect(await emailsTo('raced-in-batch@example.org')).toEqual([]);
  for (const to of ['fine-1@example.org', 'fine-2@example.org']) expect(await emailsTo(to)).toHaveLength(1);
});

test('two sends to one contact never share a statement: each merges its data, in the order they came', async () => {
  const known = await insertContact('twice-batched@example.org', { n: 0 });
  const batcher = new SendBatcher(orm, 100, 1);
  const to = (n: number) =>
    send([email(known, 'twice-batched@example.org')], [known], {
      created: { known: new Set([known]), subscribed: false, data: { set: { n, [`seen${n}`]: true }, unset: [] } },
    });
  const sends = [send([email(newId(), 'lead-3@example.org')]), to(1), to(2), send([email(newId(), 'other-3@example.org')])];
  await Promise.all(sends.map((s) => batcher.write(s)));
  const by = await writtenBy(sends.map((s) => s.emails[0].id));
  const [, first, second, other] = sends.map((s) => by[s.emails[0].id]);
  expect(first).toBe(other);
  expect(second).not.toBe(first);
  expect((await contact('twice-batched@example.org')).data).toEqual({ n: 2, seen1: true, seen2: true });
});

test('concurrent sends to one new address make one contact and every email, whichever way each was written', async () => {
  const deps = {
    links: new Links('https://mail.one.test', 'one test secret'),
    limits: { attachmentsMaxBytes: 1e6, messageMaxBytes: 2e6 },
    batcher: new SendBatcher(orm),
  };
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      sendEmails(
        orm.em.fork(),
        projectId,
        { to: 'crowd@example.org', from: 'hello@one.test', subject: 'Hi {{n}}', body: '<p>{{n}}</p>', data: { n: String(i) } },
        deps,
      ),
    ),
  );
  const [only] = await dbQuery<{ id: string }>(url, `SELECT id FROM contacts WHERE project_id = $1 AND email = 'crowd@example.org'`, [projectId]);
  expect(results.map((r) => r.emails[0].contact.id)).toEqual(Array(12).fill(only.id));
  const queued = await emailsTo('crowd@example.org');
  expect(queued.map((e) => e.id).sort()).toEqual(results.map((r) => r.emails[0].email).sort());
  expect(new Set(queued.map((e) => e.contact_id))).toEqual(new Set([only.id]));
});
