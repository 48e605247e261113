import { foldFeedCounts } from '../../src/modules/feed/feed-counts';
import { dbQuery } from '../setup/db';
import { mailedToken } from '../setup/mailbox';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(() => svc.stop());

/** Rows of the project in every table that has a project_id column, except what a reset keeps (and the counts, checked by what they answer). */
async function projectRows(projectId: string): Promise<Record<string, number>> {
  const tables = await dbQuery(
    svc.databaseUrl,
    `SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'project_id'
       AND table_name NOT IN ('project_members', 'project_invites', 'rate_limit_windows', 'rate_limit_key_windows',
                              'activity_counts', 'activity_counts_daily', 'activity_count_deltas')
     ORDER BY 1`,
  );
  const out: Record<string, number> = {};
  for (const { table_name: t } of tables) {
    const [{ n }] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM "${t}" WHERE project_id = $1`, [projectId]);
    if (n) out[t] = n;
  }
  return out;
}

async function populate(acct: Account): Promise<{ segmentId: string; executionId: string }> {
  const key = { key: acct.project.secretKey };
  await svc.api.post('/v1/track', { email: 'a@life.test', event: 'signup', data: { plan: 'pro' } }, { key: acct.project.publicKey });
  const contact = (await svc.api.post('/contacts', { email: 'b@life.test' }, key)).body;
  const topic = (await svc.api.post('/topics', { name: 'News' }, key)).body;
  await svc.api.patch(`/contacts/${contact.id}`, { topics: { [topic.id]: false } }, key);
  const segment = (
    await svc.api.post(
      '/segments',
      { name: 'Pros', condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }] } },
      key,
    )
  ).body;
  const wf = (await svc.api.post('/workflows', { name: 'Wait', eventName: 'never-tracked' }, key)).body;
  const wait = (await svc.api.post(`/workflows/${wf.id}/steps`, { type: 'WAIT_FOR_EVENT', name: 'w', config: { eventName: 'paid' } }, key)).body;
  const done = (await svc.api.post(`/workflows/${wf.id}/steps`, { type: 'EXIT', name: 'done', config: {} }, key)).body;
  await svc.api.post(`/workflows/${wf.id}/transitions`, { fromStepId: wf.steps[0].id, toStepId: wait.id }, key);
  await svc.api.post(`/workflows/${wf.id}/transitions`, { fromStepId: wait.id, toStepId: done.id, outcome: 'event' }, key);
  const started = await svc.api.post(`/workflows/${wf.id}/executions`, { contactId: contact.id }, key);
  if (started.status !== 201) throw new Error(JSON.stringify(started.body));
  const execution = started.body;
  return { segmentId: segment.id, executionId: execution.id };
}

const statusOf = async (workflowId: string) => (await svc.temporal.client.workflow.getHandle(workflowId).describe()).status.name;

const eventually = (check: () => Promise<boolean>) => until(async () => ((await check()) ? true : undefined), 20_000);

test('reset wipes the data and cancels the running workflows; the project, its keys and its members stay', async () => {
  const acct = await createAccount(svc.api, 'Resettable');
  const { segmentId, executionId } = await populate(acct);
  await eventually(async () => (await statusOf(`automation:${executionId}`)) === 'RUNNING');
  expect(Object.keys(await projectRows(acct.project.id))).toEqual(
    expect.arrayContaining(['contacts', 'contact_topics', 'events', 'segments', 'topics', 'workflows', 'workflow_executions']),
  );

  await foldFeedCounts(svc.orm.em.fork()); // counts already folded into the hourly and daily tables must go too
  const res = await svc.api.post(`/users/@me/projects/${acct.project.id}/reset`, {}, { cookie: acct.cookie });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ id: acct.project.id, reset: true, cancelledWorkflows: expect.any(Number) });
  expect(res.body.cancelledWorkflows).toBeGreaterThanOrEqual(2);
  expect(await projectRows(acct.project.id)).toEqual({});
  // The event counts fall to zero with the events, folded or not; accepted-email usage would stay.
  const key = { key: acct.project.secretKey };
  expect((await svc.api.get('/activity/types', key)).body.data).toEqual([]);
  await foldFeedCounts(svc.orm.em.fork());
  expect((await svc.api.get('/activity/types', key)).body.data).toEqual([]);
  expect((await svc.api.get('/events/stats', key)).body).toMatchObject({ totalEvents: 0, uniqueEventNames: 0 });
  await eventually(async () => (await statusOf(`segment:${segmentId}`)) !== 'RUNNING' && (await statusOf(`automation:${executionId}`)) !== 'RUNNING');

  expect((await svc.api.post('/v1/track', { email: 'again@life.test', event: 'back' }, { key: acct.project.publicKey })).status).toBe(200);
  expect((await svc.api.get('/users/@me/projects', { cookie: acct.cookie })).body.map((p: { id: string }) => p.id)).toContain(acct.project.id);
});

test('only an OWNER may reset or delete; delete removes the project and its keys stop working', async () => {
  const acct = await createAccount(svc.api, 'Doomed');
  await populate(acct);
  const signup = await svc.api.post('/auth/signup', { email: 'admin@doomed.test', password: 'admin password' });
  await svc.api.post('/auth/verify-email', { token: await mailedToken(svc, 'admin@doomed.test', 'Verify your email address') });
  await svc.api.post(`/projects/${acct.project.id}/members`, { email: 'admin@doomed.test', role: 'ADMIN' }, { cookie: acct.cookie });
  const admin = { cookie: (signup.headers.get('set-cookie') ?? '').split(';')[0] };
  expect((await svc.api.post(`/users/@me/projects/${acct.project.id}/reset`, {}, admin)).status).toBe(403);
  expect((await svc.api.delete(`/users/@me/projects/${acct.project.id}`, admin)).status).toBe(403);

  const res = await svc.api.delete(`/users/@me/projects/${acct.project.id}`, { cookie: acct.cookie });
  expect(res.body).toEqual({ id: acct.project.id, deleted: true });
  expect(await dbQuery(svc.databaseUrl, `SELECT 1 FROM projects WHERE id = $1`, [acct.project.id])).toEqual([]);
  expect(await projectRows(acct.project.id)).toEqual({});
  expect((await svc.api.get('/contacts', { key: acct.project.secretKey })).status).toBe(401);
  expect((await svc.api.get('/users/@me/projects', { cookie: acct.cookie })).body).toEqual([]);
});

test('GET /projects/:id/setup-state follows the onboarding steps; another project is 404', async () => {
  const acct = await createAccount(svc.api, 'Onboarding');
  const state = () => svc.api.get(`/projects/${acct.project.id}/setup-state`, { cookie: acct.cookie });
  const fresh = await state();
  expect(fresh.status).toBe(200);
  expect(fresh.body).toEqual({
    steps: { verifiedDomain: false, contact: false, event: false, template: false, emailSent: false, campaign: false, workflowEnabled: false },
    completed: 0,
    total: 7,
    done: false,
  });
  await svc.api.post('/v1/track', { email: 'first@onboarding.test', event: 'hello' }, { key: acct.project.publicKey });
  expect((await state()).body).toMatchObject({ steps: { contact: true, event: true, template: false }, completed: 2 });
  const stranger = await createAccount(svc.api, 'Stranger');
  expect((await svc.api.get(`/projects/${acct.project.id}/setup-state`, { cookie: stranger.cookie })).status).toBe(404);
});
