import pino from 'pino';
import { createOrm, type Orm } from '../../src/db/orm';
import { entities } from '../../src/modules/entities';
import { newId } from '../../src/db/ids';
import { TrackBatcher } from '../../src/modules/events/track-batcher';
import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
let orm: Orm;
let acct: Account;
beforeAll(async () => {
  svc = await startTestService();
  orm = await createOrm(svc.databaseUrl, { entities, poolMax: 4, log: pino({ level: 'silent' }) });
  acct = await createAccount(svc.api);
});
afterAll(async () => {
  await orm.close(true);
  await svc.stop();
});

const item = (projectId: string, email: string) => ({
  projectId,
  email,
  data: { set: { n: 1 }, unset: [] },
  event: { name: 'batched', data: {} },
});

test('an item that fails (here: a project that does not exist) fails alone; the rest of its batch is written', async () => {
  const batcher = new TrackBatcher(orm, 200, 1);
  // The first write takes the only slot; the next three queue and are flushed as one batch.
  const first = batcher.write(item(acct.project.id, 'lead@example.com'));
  const rest = [
    batcher.write(item(acct.project.id, 'ok1@example.com')),
    batcher.write(item(newId(), 'orphan@example.com')),
    batcher.write(item(acct.project.id, 'ok2@example.com')),
  ];
  const settled = await Promise.allSettled([first, ...rest]);
  expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
  const rows = await dbQuery(
    svc.databaseUrl,
    `SELECT c.email, count(e.id)::int AS events FROM contacts c JOIN events e ON e.contact_id = c.id
     WHERE c.email = ANY($1) GROUP BY c.email ORDER BY c.email`,
    [['lead@example.com', 'ok1@example.com', 'ok2@example.com', 'orphan@example.com']],
  );
  expect(rows).toEqual([
    { email: 'lead@example.com', events: 1 },
    { email: 'ok1@example.com', events: 1 },
    { email: 'ok2@example.com', events: 1 },
  ]);
});

test('two tracks of one contact queued together are both recorded, on one contact', async () => {
  const batcher = new TrackBatcher(orm, 200, 1);
  const results = await Promise.all([
    batcher.write(item(acct.project.id, 'lead2@example.com')),
    batcher.write(item(acct.project.id, 'twice@example.com')),
    batcher.write(item(acct.project.id, 'twice@example.com')),
  ]);
  expect(results[1].contactId).toBe(results[2].contactId);
  expect(results[1].event.id).not.toBe(results[2].event.id);
  const rows = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM events WHERE contact_id = $1`, [results[1].contactId]);
  expect(rows).toEqual([{ n: 2 }]);
});
