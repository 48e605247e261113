import { dbQuery } from '../setup/db';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

const waitFor = <T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000) => until(probe, ms, what);

const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

describe('snooze end is a durable Temporal timer', () => {
  let svc: TestService;
  beforeAll(async () => {
    svc = await startTestService();
  });
  afterAll(() => svc.stop());

  test('the contact is resubscribed when the snooze ends, with contact.subscribed {reason: snooze_expired}', async () => {
    const { project } = await createAccount(svc.api);
    const key = { key: project.secretKey };
    const c = (await svc.api.post('/contacts', { email: 'nap@example.com' }, key)).body;
    const snoozed = await svc.api.patch(`/contacts/${c.id}`, { snoozedUntil: inSeconds(2) }, key);
    expect(snoozed.body.subscribed).toBe(false);

    const back = await waitFor('resubscription', async () => {
      const r = await svc.api.get(`/contacts/${c.id}`, key);
      return r.body.subscribed ? r.body : undefined;
    });
    expect(back.snoozedUntil).toBeNull();
    const events = await dbQuery(svc.databaseUrl, 'SELECT name, data FROM events WHERE contact_id = $1 ORDER BY created_at', [c.id]);
    expect(events).toEqual([
      { name: 'contact.unsubscribed', data: { reason: 'snooze', snoozedUntil: snoozed.body.snoozedUntil } },
      { name: 'contact.subscribed', data: { reason: 'snooze_expired' } },
    ]);

    const handle = svc.temporal.client.workflow.getHandle(`contact-snooze:${c.id}`);
    await handle.result();
    const description = await handle.describe();
    expect(description.status.name).toBe('COMPLETED');
    expect(description.searchAttributes.ProjectId).toEqual([project.id]);
  });

  test('a later snooze moves the wake-up; an early manual resubscribe makes the timer a no-op', async () => {
    const { project } = await createAccount(svc.api);
    const key = { key: project.secretKey };
    const c = (await svc.api.post('/contacts', { email: 'longer@example.com' }, key)).body;
    await svc.api.patch(`/contacts/${c.id}`, { snoozedUntil: inSeconds(2) }, key);
    const later = inSeconds(3600);
    await svc.api.patch(`/contacts/${c.id}`, { snoozedUntil: later }, key);
    await new Promise((r) => setTimeout(r, 4000));
    const still = (await svc.api.get(`/contacts/${c.id}`, key)).body;
    expect(still).toMatchObject({ subscribed: false, snoozedUntil: later });
    const description = await svc.temporal.client.workflow.getHandle(`contact-snooze:${c.id}`).describe();
    expect(description.status.name).toBe('RUNNING');

    const other = (await svc.api.post('/contacts', { email: 'early@example.com' }, key)).body;
    await svc.api.patch(`/contacts/${other.id}`, { snoozedUntil: inSeconds(2) }, key);
    await svc.api.patch(`/contacts/${other.id}`, { subscribed: false }, key);
    await svc.temporal.client.workflow.getHandle(`contact-snooze:${other.id}`).result();
    const after = (await svc.api.get(`/contacts/${other.id}`, key)).body;
    expect(after).toMatchObject({ subscribed: false, snoozedUntil: null });
    const names = (await dbQuery(svc.databaseUrl, 'SELECT name FROM events WHERE contact_id = $1', [other.id])).map((e) => e.name);
    expect(names).toEqual(['contact.unsubscribed']);
  });
});

test('a snooze that ends while the service is down is applied when it comes back', async () => {
  const env = { TEMPORAL_DEV_SERVER_PERSISTENCE: 'postgres' };
  let svc = await startTestService(env);
  const databaseUrl = svc.databaseUrl;
  const { project } = await createAccount(svc.api);
  const key = { key: project.secretKey };
  const c = (await svc.api.post('/contacts', { email: 'offline@example.com' }, key)).body;
  await svc.api.patch(`/contacts/${c.id}`, { snoozedUntil: inSeconds(3) }, key);
  await svc.stop();

  await new Promise((r) => setTimeout(r, 4000));
  expect((await dbQuery(databaseUrl, 'SELECT subscribed FROM contacts WHERE id = $1', [c.id]))[0].subscribed).toBe(false);

  svc = await startTestService({ ...env, DATABASE_URL: databaseUrl });
  try {
    await waitFor('resubscription after restart', async () => {
      const [row] = await dbQuery(databaseUrl, 'SELECT subscribed FROM contacts WHERE id = $1', [c.id]);
      return row.subscribed ? true : undefined;
    });
  } finally {
    await svc.stop();
  }
});
