/**
 * The common /v1/send in one statement (`queueInOneStatement`): all of it or nothing, and nothing
 * when a recipient changed since the send read them, so the caller can take the locking transaction.
 */
import pino from 'pino';
import { createOrm, type Orm } from '../../src/db/orm';
import { newId } from '../../src/db/ids';
import { Links } from '../../src/mail/links';
import { type QueuedEmailInput, queueInOneStatement, sendEmails } from '../../src/modules/emails/emails.service';
import { createTestDatabase, dbQuery } from '../setup/db';
import { projectSendingFrom } from '../setup/sender';

let url: string;
let orm: Orm;
let projectId: string;

beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { poolMax: 8, log: pino({ level: 'silent' }) });
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
  (await dbQuery<{ id: string; subscribed: boolean; data: Record<string, unknown> }>(url, `SELECT id, subscribed, data FROM contacts WHERE project_id = $1 AND email = $2`, [projectId, to]))[0];
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

test('a new recipient is created with the send\'s data and a known one gets it merged; both emails are queued', async () => {
  const knownId = await insertContact('known@example.org', { old: 1, keep: 2 });
  const fresh = newId();
  const sent = [email(fresh, 'new@example.org'), email(knownId, 'known@example.org')];
  expect(await queueInOneStatement(orm.em.fork(), sent, { created: { known: new Set([knownId]), subscribed: false, data }, notify: false })).toBe(true);
  expect(await contact('new@example.org')).toEqual({ id: fresh, subscribed: false, data: { plan: 'pro' } });
  expect(await contact('known@example.org')).toEqual({ id: knownId, subscribed: true, data: { keep: 2, plan: 'pro' } });
  const [queued] = await emailsTo('new@example.org');
  expect(queued).toMatchObject({ id: sent[0].id, contact_id: fresh, status: 'QUEUED', message_id: `<${sent[0].id}@one.test>`, headers: { 'X-Test': '1' } });
  expect(await emailsTo('known@example.org')).toHaveLength(1);
});

test('a recipient someone else made a contact since the read: nothing at all is written, and the caller is told', async () => {
  const theirs = await insertContact('raced@example.org', { theirs: true });
  const sent = [email(newId(), 'other-new@example.org'), email(newId(), 'raced@example.org')];
  expect(await queueInOneStatement(orm.em.fork(), sent, { created: { known: new Set(), subscribed: false, data }, notify: false })).toBe(false);
  expect(await contact('other-new@example.org')).toBeUndefined();
  expect(await contact('raced@example.org')).toEqual({ id: theirs, subscribed: true, data: { theirs: true } });
  expect(await emailsTo('other-new@example.org')).toEqual([]);
  expect(await emailsTo('raced@example.org')).toEqual([]);
});

test('a known recipient deleted since the read: nothing is written either', async () => {
  const gone = await insertContact('gone@example.org', {});
  await dbQuery(url, `DELETE FROM contacts WHERE id = $1`, [gone]);
  expect(await queueInOneStatement(orm.em.fork(), [email(gone, 'gone@example.org')], { created: { known: new Set([gone]), subscribed: false, data }, notify: false })).toBe(false);
  expect(await emailsTo('gone@example.org')).toEqual([]);
});

test('concurrent sends to one new address make one contact and every email, whichever way each was written', async () => {
  const deps = { links: new Links('https://mail.one.test', 'one test secret'), limits: { attachmentsMaxBytes: 1e6, messageMaxBytes: 2e6 } };
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      sendEmails(orm.em.fork(), projectId, { to: 'crowd@example.org', from: 'hello@one.test', subject: 'Hi {{n}}', body: '<p>{{n}}</p>', data: { n: String(i) } }, deps),
    ),
  );
  const [only] = await dbQuery<{ id: string }>(url, `SELECT id FROM contacts WHERE project_id = $1 AND email = 'crowd@example.org'`, [projectId]);
  expect(results.map((r) => r.emails[0].contact.id)).toEqual(Array(12).fill(only.id));
  const queued = await emailsTo('crowd@example.org');
  expect(queued.map((e) => e.id).sort()).toEqual(results.map((r) => r.emails[0].email).sort());
  expect(new Set(queued.map((e) => e.contact_id))).toEqual(new Set([only.id]));
});
