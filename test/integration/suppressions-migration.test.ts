/**
 * The migration that brings in the suppression list lists the contacts a bounce or a complaint
 * unsubscribed before it: taken back to the migration before it, given such contacts (and others that
 * must not be listed), and migrated again.
 */
import pino from 'pino';
import { createOrm, migrate, type Orm } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { createTestDatabase, dbQuery } from '../setup/db';

let url: string;
let orm: Orm;
beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 2, log: pino({ level: 'silent' }) });
});
afterAll(async () => {
  await orm.close();
});

test('contacts still unsubscribed for a bounce, the soft-bounce limit or a complaint are listed; re-subscribed ones and other reasons are not', async () => {
  // Reverts this migration (and any after it), leaving the one before it applied.
  await orm.getMigrator().down({ to: 'Migration20261128061700_suppressions' });
  const project = '00000000-0000-4000-8000-000000000001';
  await dbQuery(url, `INSERT INTO projects (id, name, public_key, secret_key) VALUES ($1, 'p', 'pk_migration', 'sk_migration')`, [project]);
  const emailId = '00000000-0000-4000-8000-0000000000e1';
  // who, subscribed now, its subscription events (oldest first)
  const contacts: Array<[string, boolean, Array<[string, Record<string, unknown>]>]> = [
    ['hard@x.test', false, [['contact.unsubscribed', { reason: 'bounce', emailId }]]],
    ['soft@x.test', false, [['contact.unsubscribed', { reason: 'soft-bounce', emailId }]]],
    ['Angry@x.test', false, [['contact.unsubscribed', { reason: 'complaint', emailId: 'not-a-uuid' }]]],
    ['link@x.test', false, [['contact.unsubscribed', { reason: 'unsubscribe_link' }]]],
    [
      'back@x.test',
      true,
      [
        ['contact.unsubscribed', { reason: 'bounce', emailId }],
        ['contact.subscribed', { source: 'api' }],
      ],
    ],
    [
      'later@x.test',
      false,
      [
        ['contact.unsubscribed', { reason: 'complaint' }],
        ['contact.subscribed', { source: 'api' }],
        ['contact.unsubscribed', { reason: 'api' }],
      ],
    ],
    [
      'topic@x.test',
      false,
      [
        ['contact.unsubscribed', { reason: 'bounce', emailId }],
        ['contact.subscribed', { topicId: '00000000-0000-4000-8000-0000000000f1' }],
      ],
    ],
  ];
  for (const [i, [email, subscribed, events]] of contacts.entries()) {
    const id = `00000000-0000-4000-8000-00000000010${i}`;
    await dbQuery(url, `INSERT INTO contacts (id, project_id, email, subscribed) VALUES ($1, $2, $3, $4)`, [id, project, email, subscribed]);
    for (const [n, [name, data]] of events.entries()) {
      await dbQuery(
        url,
        `INSERT INTO events (id, project_id, contact_id, name, data, created_at) VALUES (gen_random_uuid(), $1, $2, $3, $4, now() + make_interval(secs => $5))`,
        [project, id, name, data, n],
      );
    }
  }
  expect(await migrate(orm, url)).toContain('Migration20261128061700_suppressions');
  const listed = await dbQuery(url, `SELECT email, reason, email_id, detail FROM suppressions WHERE project_id = $1 ORDER BY email`, [project]);
  expect(listed).toEqual([
    { email: 'angry@x.test', reason: 'COMPLAINT', email_id: null, detail: expect.stringContaining('unsubscription') },
    { email: 'hard@x.test', reason: 'BOUNCE', email_id: emailId, detail: expect.stringContaining('unsubscription') },
    { email: 'soft@x.test', reason: 'BOUNCE', email_id: emailId, detail: expect.stringContaining('soft-bounce limit') },
    { email: 'topic@x.test', reason: 'BOUNCE', email_id: emailId, detail: expect.any(String) },
  ]);
});
