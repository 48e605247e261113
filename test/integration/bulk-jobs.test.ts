import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let svc: TestService;
let acct: Account;
let other: Account;
beforeAll(async () => {
  svc = await startTestService();
  acct = await createAccount(svc.api);
  other = await createAccount(svc.api);
});
afterAll(() => svc.stop());

const key = () => ({ key: acct.project.secretKey });

async function contacts(prefix: string, n: number, subscribed = true, account = acct): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await svc.api.post('/contacts', { email: `${prefix}${i}@bulk.test`, subscribed }, { key: account.project.secretKey });
    ids.push(res.body.id);
  }
  return ids;
}

/** Polls the job the way a client would, until it completes. */
async function finished(jobId: string) {
  return until(
    async () => {
      const res = await svc.api.get(`/contacts/bulk/${jobId}`, key());
      expect(res.status).toBe(200);
      return res.body.status === 'COMPLETED' ? res.body : undefined;
    },
    30_000,
    `bulk job ${jobId}`,
  );
}

const eventNames = async (ids: string[]) =>
  (await dbQuery(svc.databaseUrl, `SELECT name FROM events WHERE contact_id = ANY($1) ORDER BY name`, [ids])).map((r) => r.name);

test('bulk-unsubscribe: 202 with a job, run by its bulk-job workflow; events only for real changes; other projects untouched', async () => {
  const subscribed = await contacts('unsub', 120);
  const already = await contacts('already', 3, false);
  const foreign = await contacts('foreign', 2, true, other);
  const res = await svc.api.post('/contacts/bulk-unsubscribe', { contactIds: [...subscribed, ...already, ...foreign, subscribed[0]] }, key());
  expect(res.status).toBe(202);
  expect(res.body).toMatchObject({ jobId: expect.any(String), type: 'unsubscribe', total: 125 });
  const job = await finished(res.body.jobId);
  expect(job).toMatchObject({ processed: 125, changed: 120, unchanged: 3, notFound: foreign, completedAt: expect.any(String) });

  const states = await dbQuery(
    svc.databaseUrl,
    `SELECT subscribed, count(*)::int AS n FROM contacts WHERE id = ANY($1) GROUP BY subscribed ORDER BY subscribed`,
    [[...subscribed, ...already, ...foreign]],
  );
  expect(states).toEqual([
    { subscribed: false, n: 123 },
    { subscribed: true, n: 2 },
  ]);
  const names = await eventNames([...subscribed, ...already]);
  expect(names.filter((n) => n === 'contact.unsubscribed')).toHaveLength(120);

  const workflow = await svc.temporal.client.workflow.getHandle(`bulk-job:${res.body.jobId}`).describe();
  expect(workflow.status.name).toBe('COMPLETED');
});

test('bulk-subscribe resubscribes and records contact.subscribed once per contact', async () => {
  const ids = await contacts('resub', 4, false);
  const job = await finished((await svc.api.post('/contacts/bulk-subscribe', { contactIds: ids }, key())).body.jobId);
  expect(job).toMatchObject({ type: 'subscribe', changed: 4, unchanged: 0, notFound: [] });
  expect((await eventNames(ids)).filter((n) => n === 'contact.subscribed')).toHaveLength(4);
});

test('bulk-delete removes the contacts and everything hanging off them', async () => {
  const ids = await contacts('del', 5);
  for (const id of ids) {
    await svc.api.post('/events/track', { email: `del${ids.indexOf(id)}@bulk.test`, event: 'seen' }, key());
  }
  const keep = await contacts('keep', 1);
  const job = await finished((await svc.api.post('/contacts/bulk-delete', { contactIds: ids }, key())).body.jobId);
  expect(job).toMatchObject({ type: 'delete', changed: 5, notFound: [] });
  expect(await dbQuery(svc.databaseUrl, `SELECT id FROM contacts WHERE id = ANY($1)`, [ids])).toEqual([]);
  expect(await dbQuery(svc.databaseUrl, `SELECT id FROM events WHERE contact_id = ANY($1)`, [ids])).toEqual([]);
  expect(await dbQuery(svc.databaseUrl, `SELECT id FROM contacts WHERE id = $1`, [keep[0]])).toHaveLength(1);
});

test('bad input is 422 and starts no job; another project cannot read a job', async () => {
  const ids = Array.from({ length: 1001 }, () => crypto.randomUUID());
  const tooMany = await svc.api.post('/contacts/bulk-delete', { contactIds: ids }, key());
  expect(tooMany.status).toBe(422);
  expect(tooMany.body.error.errors).toEqual([expect.objectContaining({ field: 'contactIds', code: 'too_big' })]);
  for (const body of [{}, { contactIds: [] }, { contactIds: ['not-a-uuid'] }, { contactIds: 'x' }]) {
    const res = await svc.api.post('/contacts/bulk-subscribe', body, key());
    expect(res.status).toBe(422);
  }
  const [{ n }] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM bulk_jobs WHERE array_length(contact_ids, 1) > 1000 OR contact_ids = '{}'`);
  expect(n).toBe(0);

  const mine = await svc.api.post('/contacts/bulk-subscribe', { contactIds: [crypto.randomUUID()] }, key());
  const theirs = await svc.api.get(`/contacts/bulk/${mine.body.jobId}`, { key: other.project.secretKey });
  expect(theirs.status).toBe(404);
  expect((await svc.api.get('/contacts/bulk/nope', key())).status).toBe(422);
});
