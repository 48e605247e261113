import http from 'node:http';
import type net from 'node:net';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { transaction } from '../../src/db/orm';
import { startExecution } from '../../src/modules/automations/executions.service';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { until } from '../setup/until';

/** A webhook receiver: records requests, answers with `replies` in order (then 200). */
class Receiver {
  readonly requests: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> = [];
  replies: number[] = [];
  private server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      this.requests.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.statusCode = this.replies.shift() ?? 200;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: res.statusCode < 400, n: this.requests.length }));
    });
  });
  url = '';
  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
    return this;
  }
  stop() {
    this.server.close();
  }
}

let dns: ZoneDnsServer;
let smtp: SmtpSink;
let hook: Receiver;
let svc: TestService;
let acct: Account;
let key: { key: string };
let pub: { key: string };
let welcome: { id: string };
let news: { id: string };

beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  hook = await new Receiver().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, SMTP_URL: smtp.url, WEBHOOK_ALLOW_PRIVATE: 'true' });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  pub = { key: acct.project.publicKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'flow.test');
  welcome = (
    await svc.api.post(
      '/templates',
      { name: 'Welcome', subject: 'Welcome {{name ?? there}}', body: '<p>Hi {{name}}, plan {{plan}}</p>', from: 'hi@flow.test', type: 'TRANSACTIONAL' },
      key,
    )
  ).body;
  news = (await svc.api.post('/templates', { name: 'News', subject: 'News', body: '<p>news</p>', from: 'hi@flow.test', type: 'MARKETING' }, key)).body;
});
afterAll(async () => {
  await svc.stop();
  hook.stop();
  await smtp.stop();
  await dns.stop();
});

/** Builds a workflow from a list of steps and edges; answers its id and the step ids by name. */
async function build(
  trigger: string,
  steps: Array<{ name: string; type: string; config?: unknown }>,
  edges: Array<[string, string, Record<string, string>?]>,
  opts: { enable?: boolean; allowReentry?: boolean } = {},
) {
  const w = (await svc.api.post('/workflows', { name: `On ${trigger}`, triggerConfig: { eventName: trigger } }, key)).body;
  const ids: Record<string, string> = { trigger: w.steps[0].id };
  for (const s of steps) {
    const res = await svc.api.post(`/workflows/${w.id}/steps`, s, key);
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
    ids[s.name] = res.body.id;
  }
  for (const [from, to, extra] of edges) {
    const res = await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: ids[from], toStepId: ids[to], ...extra }, key);
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
  }
  if (opts.allowReentry) await svc.api.patch(`/workflows/${w.id}`, { allowReentry: true }, key);
  if (opts.enable !== false) {
    const res = await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key);
    if (res.status !== 200) throw new Error(JSON.stringify(res.body));
  }
  return { id: w.id as string, ids };
}

const executions = async (workflowId: string, status?: string) =>
  (await svc.api.get(`/workflows/${workflowId}/executions${status ? `?status=${status}` : ''}`, key)).body.data as Array<Record<string, any>>;
const execution = async (workflowId: string, id: string) => (await svc.api.get(`/workflows/${workflowId}/executions/${id}`, key)).body;
const whenDone = (workflowId: string, n = 1) =>
  until(async () => {
    const xs = await executions(workflowId);
    return xs.length >= n && xs.every((x) => !['RUNNING', 'WAITING'].includes(x.status)) ? xs : undefined;
  });
const track = (email: string, event: string, data?: Record<string, unknown>) => svc.api.post('/v1/track', { email, event, data }, pub);

describe('definitions', () => {
  test('POST /workflows answers the pinned shape with its TRIGGER step; eventName is accepted as shorthand', async () => {
    const res = await svc.api.post('/workflows', { name: 'Onboarding', description: 'new users', triggerConfig: { eventName: 'signup' } }, key);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.any(String),
      name: 'Onboarding',
      description: 'new users',
      triggerType: 'EVENT',
      triggerConfig: { eventName: 'signup' },
      enabled: false,
      allowReentry: false,
      steps: [{ id: expect.any(String), type: 'TRIGGER' }],
      transitions: [],
    });
    const short = await svc.api.post('/workflows', { name: 'Short', eventName: 'purchase' }, key);
    expect(short.body.triggerConfig).toEqual({ eventName: 'purchase' });
    const missing = await svc.api.post('/workflows', { name: 'x' }, key);
    expect(missing.status).toBe(422);
    const list = await svc.api.get('/workflows', key);
    expect(list.body.data.map((w: any) => w.name)).toEqual(expect.arrayContaining(['Onboarding', 'Short']));
    const patched = await svc.api.patch(
      `/workflows/${res.body.id}`,
      { name: 'Renamed', description: null, triggerConfig: { eventName: 'joined' }, allowReentry: true },
      key,
    );
    expect(patched.body).toMatchObject({ name: 'Renamed', description: null, triggerConfig: { eventName: 'joined' }, allowReentry: true, enabled: false });
  });

  test('POST /workflows always creates an EVENT-triggered, disabled workflow, whatever the body asks for', async () => {
    const res = await svc.api.post('/workflows', { name: 'Eager', eventName: 'eager', triggerType: 'SCHEDULE', enabled: true }, key);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ triggerType: 'EVENT', triggerConfig: { eventName: 'eager' }, enabled: false });
    expect((await svc.api.get(`/workflows/${res.body.id}`, key)).body).toMatchObject({ id: res.body.id, triggerType: 'EVENT', enabled: false });
    expect((await svc.api.patch(`/workflows/${res.body.id}`, { triggerType: 'SCHEDULE' }, key)).status).toBe(422);
  });

  test('steps: each type with its config; bad configs are 422 with config.* fields', async () => {
    const w = (await svc.api.post('/workflows', { name: 'Steps', eventName: 'x' }, key)).body;
    const ok = [
      { type: 'SEND_EMAIL', name: 'mail', config: { templateId: welcome.id, recipient: { type: 'CUSTOM', customEmail: 'boss@flow.test' } } },
      { type: 'DELAY', name: 'wait', config: { amount: 2, unit: 'days' } },
      { type: 'WAIT_FOR_EVENT', name: 'await', config: { eventName: 'purchase', timeout: 3600 } },
      { type: 'CONDITION', name: 'if', config: { field: 'data.plan', operator: 'equals', value: 'pro' } },
      { type: 'WEBHOOK', name: 'call', config: { url: 'https://example.com/{{id}}', headers: { 'X-Key': 'k' }, body: { email: '{{email}}' } } },
      { type: 'UPDATE_CONTACT', name: 'update', config: { updates: { stage: 'won' }, subscriptionAction: 'subscribe' } },
      { type: 'EXIT', name: 'stop', config: { reason: 'done' } },
    ];
    for (const s of ok) {
      const res = await svc.api.post(`/workflows/${w.id}/steps`, { ...s, position: { x: 1, y: 2 } }, key);
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(String), type: s.type, name: s.name, config: expect.objectContaining(s.config), position: { x: 1, y: 2 } });
    }
    const bad: Array<[unknown, string]> = [
      [{ type: 'DELAY', name: 'd', config: { amount: 0, unit: 'days' } }, 'config.amount'],
      [{ type: 'DELAY', name: 'd', config: { amount: 2, unit: 'weeks' } }, 'config.unit'],
      [{ type: 'DELAY', name: 'd', config: { amount: 366, unit: 'days' } }, 'config.amount'],
      [{ type: 'WAIT_FOR_EVENT', name: 'w', config: { eventName: 'x', timeout: 40_000_000 } }, 'config.timeout'],
      [{ type: 'SEND_EMAIL', name: 's', config: { templateId: '00000000-0000-4000-8000-000000000000' } }, 'config.templateId'],
      [{ type: 'SEND_EMAIL', name: 's', config: { templateId: welcome.id, recipient: { type: 'CUSTOM' } } }, 'config.recipient.customEmail'],
      [{ type: 'CONDITION', name: 'c', config: { field: 'data.plan', operator: 'near', value: 1 } }, 'config'],
      [{ type: 'CONDITION', name: 'c', config: { field: 'nickname', operator: 'equals', value: 1 } }, 'config.field'],
      [{ type: 'UPDATE_CONTACT', name: 'u', config: { subscriptionAction: 'maybe' } }, 'config.subscriptionAction'],
      [{ type: 'WEBHOOK', name: 'h', config: { url: 'https://x', method: 'TRACE' } }, 'config.method'],
    ];
    for (const [s, field] of bad) {
      const res = await svc.api.post(`/workflows/${w.id}/steps`, s, key);
      expect(res.status).toBe(422);
      expect(res.body.error.errors.map((e: any) => e.field)).toContain(field);
    }
    expect((await svc.api.post(`/workflows/${w.id}/steps`, { type: 'TRIGGER', name: 't' }, key)).status).toBe(400);
  });

  test('transitions: branches for CONDITION, outcomes for WAIT_FOR_EVENT; a graph that cannot run is refused when enabled', async () => {
    const w = (await svc.api.post('/workflows', { name: 'Graph', eventName: 'g' }, key)).body;
    const trigger = w.steps[0].id;
    const cond = (
      await svc.api.post(
        `/workflows/${w.id}/steps`,
        { type: 'CONDITION', name: 'if', config: { field: 'contact.subscribed', operator: 'equals', value: true } },
        key,
      )
    ).body;
    const wait = (await svc.api.post(`/workflows/${w.id}/steps`, { type: 'WAIT_FOR_EVENT', name: 'wait', config: { eventName: 'e', timeout: 60 } }, key)).body;
    const done = (await svc.api.post(`/workflows/${w.id}/steps`, { type: 'EXIT', name: 'exit' }, key)).body;
    const t = (from: string, to: string, extra = {}) => svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: from, toStepId: to, ...extra }, key);

    expect((await t(cond.id, done.id)).status).toBe(400);
    expect((await t(trigger, done.id, { branch: 'yes' })).status).toBe(400);
    expect((await t(wait.id, done.id)).status).toBe(400);
    expect((await t(done.id, cond.id)).status).toBe(400);
    const other = (await svc.api.post('/workflows', { name: 'Other', eventName: 'o' }, key)).body;
    expect((await t(trigger, other.steps[0].id)).status).toBe(400);

    expect((await t(trigger, cond.id)).status).toBe(201);
    expect((await t(cond.id, wait.id, { branch: 'yes' })).status).toBe(201);
    expect((await t(cond.id, wait.id, { branch: 'yes' })).status).toBe(409);
    const refused = await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key);
    expect(refused.status).toBe(400);
    expect(refused.body.error.details.problems).toEqual(
      expect.arrayContaining([expect.stringMatching(/no "no" branch/), expect.stringMatching(/no "event" transition/)]),
    );
    expect(refused.body.error.details.problems).not.toEqual(expect.arrayContaining([expect.stringMatching(/timeout/)]));
    await t(cond.id, done.id, { branch: 'no' });
    await t(wait.id, done.id, { outcome: 'event' });
    const timeout = (await t(wait.id, done.id, { outcome: 'timeout' })).body;
    expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key)).body.enabled).toBe(true);
    expect((await svc.api.delete(`/workflows/${w.id}/transitions/${timeout.id}`, key)).body).toEqual({ id: timeout.id, deleted: true });
  });

  test('deleting a step with splice=true reconnects its neighbours; PATCH changes a step', async () => {
    const { id, ids } = await build(
      'splice',
      [
        { name: 'a', type: 'UPDATE_CONTACT', config: {} },
        { name: 'b', type: 'EXIT' },
      ],
      [
        ['trigger', 'a'],
        ['a', 'b'],
      ],
      { enable: false },
    );
    const patched = await svc.api.patch(`/workflows/${id}/steps/${ids.a}`, { name: 'renamed', config: { updates: { x: 1 } } }, key);
    expect(patched.body).toMatchObject({ name: 'renamed', config: { updates: { x: 1 }, subscriptionAction: 'none' } });
    await svc.api.delete(`/workflows/${id}/steps/${ids.a}?splice=true`, key);
    const w = (await svc.api.get(`/workflows/${id}`, key)).body;
    expect(w.transitions.map((t: any) => [t.fromStepId, t.toStepId])).toEqual([[ids.trigger, ids.b]]);
    expect((await svc.api.delete(`/workflows/${id}/steps/${ids.trigger}`, key)).status).toBe(400);
  });

  test('GET /workflows/fields lists contact fields, data keys and event names', async () => {
    await track('fields@flow.test', 'visited_pricing', { plan: 'pro' });
    const res = await svc.api.get('/workflows/fields', key);
    expect(res.body.contact.map((f: any) => f.field)).toEqual(['contact.email', 'contact.subscribed']);
    expect(res.body.data.map((f: any) => f.field)).toContain('data.plan');
    expect(res.body.events.map((f: any) => f.field)).toContain('event.visited_pricing');
  });
});

describe('executions', () => {
  test('a SEND_EMAIL step to a suppressed address completes, its email recorded SUPPRESSED and never sent', async () => {
    const { id } = await build('suppressed_signup', [{ name: 'welcome', type: 'SEND_EMAIL', config: { templateId: welcome.id } }], [['trigger', 'welcome']]);
    await svc.api.post('/suppressions', { emails: ['listed@flow.test'] }, key);
    smtp.received.length = 0;
    await track('listed@flow.test', 'suppressed_signup');
    await track('free@flow.test', 'suppressed_signup');
    expect((await whenDone(id, 2)).map((x) => x.status)).toEqual(['COMPLETED', 'COMPLETED']);
    await until(async () => (smtp.received.some((m) => m.envelope.to[0] === 'free@flow.test') ? true : undefined), 20_000, 'mail to free@');
    const listed = async () =>
      (
        await dbQuery<{ status: string }>(svc.databaseUrl, `SELECT e.status FROM emails e WHERE e.to_email = 'listed@flow.test' AND e.project_id = $1`, [
          acct.project.id,
        ])
      )[0]?.status;
    await until(async () => ((await listed()) === 'SUPPRESSED' ? true : undefined), 20_000, 'the step’s email suppressed');
    expect(smtp.received.some((m) => m.envelope.to[0] === 'listed@flow.test')).toBe(false);
  });

  // A DELAY's timer is tested in skipped time (test/workflows/automation.test.ts); here a step that does not wait stands in its place.
  test('on signup: welcome, a note, and if not activated a reminder, else the webhook', async () => {
    const { id } = await build(
      'signup',
      [
        { name: 'welcome', type: 'SEND_EMAIL', config: { templateId: welcome.id } },
        { name: 'note', type: 'UPDATE_CONTACT', config: { updates: { welcomed: true } } },
        { name: 'activated?', type: 'CONDITION', config: { field: 'event.activated', operator: 'triggered' } },
        { name: 'reminder', type: 'SEND_EMAIL', config: { templateId: welcome.id } },
        {
          name: 'hook',
          type: 'WEBHOOK',
          config: { url: `${hook.url}/activated/{{email}}?plan={{plan}}`, headers: { 'X-Contact': '{{id}}' }, body: { email: '{{email}}', plan: '{{plan}}' } },
        },
      ],
      [
        ['trigger', 'welcome'],
        ['welcome', 'note'],
        ['note', 'activated?'],
        ['activated?', 'reminder', { branch: 'no' }],
        ['activated?', 'hook', { branch: 'yes' }],
      ],
    );
    smtp.received.length = 0;
    // Activated before the condition asks: with no wait in between, before signing up.
    await track('keen@flow.test', 'activated');
    await track('lazy@flow.test', 'signup', { name: 'Lazy', plan: 'free' });
    await track('keen@flow.test', 'signup', { name: 'Keen', plan: 'pro' });
    const done = await whenDone(id, 2);
    expect(done.map((x) => x.status)).toEqual(['COMPLETED', 'COMPLETED']);

    const received = await smtp.waitFor(3);
    const to = (email: string) => received.filter((m) => m.envelope.to[0] === email).map((m) => m.parsed.subject);
    expect(to('lazy@flow.test')).toEqual(['Welcome Lazy', 'Welcome Lazy']);
    expect(to('keen@flow.test')).toEqual(['Welcome Keen']);
    expect(hook.requests).toHaveLength(1);
    const [call] = hook.requests;
    expect(call.method).toBe('POST');
    expect(call.url).toBe('/activated/keen%40flow.test?plan=pro');
    expect(JSON.parse(call.body)).toEqual({ email: 'keen@flow.test', plan: 'pro' });
    const keen = done.find((x) => x.context.name === 'Keen')!;
    expect(call.headers['x-contact']).toBe(keen.contactId);
    const detail = await execution(id, keen.id);
    expect(detail.steps.map((s: any) => [s.type, s.status])).toEqual([
      ['TRIGGER', 'COMPLETED'],
      ['SEND_EMAIL', 'COMPLETED'],
      ['UPDATE_CONTACT', 'COMPLETED'],
      ['CONDITION', 'COMPLETED'],
      ['WEBHOOK', 'COMPLETED'],
    ]);
    expect(detail.steps.every((s: any) => s.startedAt && s.completedAt)).toBe(true);
    expect(detail.context.webhook).toEqual({ status: 200, body: { ok: true, n: 1 } });
    const handle = svc.temporal.client.workflow.getHandle(`automation:${keen.id}`);
    // The execution's row is COMPLETED by the last step's activity, a moment before the workflow itself ends.
    await handle.result();
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect((await handle.describe()).searchAttributes.ProjectId).toEqual([acct.project.id]);
  });

  test('WAIT_FOR_EVENT: the event (its data merged into the context) or the timeout', async () => {
    const { id, ids } = await build(
      'cart',
      [
        { name: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'purchase', timeout: 2 } },
        { name: 'bought', type: 'UPDATE_CONTACT', config: { updates: { outcome: 'bought' } } },
        { name: 'gave up', type: 'UPDATE_CONTACT', config: { updates: { outcome: 'abandoned' } } },
      ],
      [
        ['trigger', 'wait'],
        ['wait', 'bought', { outcome: 'event' }],
        ['wait', 'gave up', { outcome: 'timeout' }],
      ],
    );
    await track('buyer@flow.test', 'cart');
    await track('browser@flow.test', 'cart');
    await until(async () => ((await executions(id, 'WAITING')).length === 2 ? true : undefined));
    const waits = await dbQuery(
      svc.databaseUrl,
      `SELECT event_name FROM workflow_waits w JOIN workflow_executions x ON x.id = w.execution_id WHERE x.workflow_id = $1`,
      [id],
    );
    expect(waits).toEqual([{ event_name: 'purchase' }, { event_name: 'purchase' }]);
    await track('buyer@flow.test', 'purchase', { amount: 42 });
    const done = await whenDone(id, 2);
    const contactData = async (email: string) => (await dbQuery(svc.databaseUrl, `SELECT data FROM contacts WHERE email = $1`, [email]))[0].data;
    expect((await contactData('buyer@flow.test')).outcome).toBe('bought');
    expect((await contactData('browser@flow.test')).outcome).toBe('abandoned');
    const buyer = done.find((x) => x.context.amount === 42);
    expect(buyer?.context.lastEvent).toMatchObject({ name: 'purchase' });
    expect(ids.wait).toBeDefined();
    expect(
      await dbQuery(svc.databaseUrl, `SELECT 1 FROM workflow_waits w JOIN workflow_executions x ON x.id = w.execution_id WHERE x.workflow_id = $1`, [id]),
    ).toHaveLength(0);
  });

  test('WAIT_FOR_EVENT with a timeout and no "timeout" transition: the event leads on, the timeout ends the execution COMPLETED', async () => {
    const { id } = await build(
      'activation',
      [
        { name: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'activated', timeout: 2 } },
        { name: 'follow-up', type: 'UPDATE_CONTACT', config: { updates: { followedUp: true } } },
      ],
      [
        ['trigger', 'wait'],
        ['wait', 'follow-up', { outcome: 'event' }],
      ],
    );
    await track('active@flow.test', 'activation');
    await track('idle@flow.test', 'activation');
    await until(async () => ((await executions(id, 'WAITING')).length === 2 ? true : undefined));
    await track('active@flow.test', 'activated');
    const done = await whenDone(id, 2);
    expect(done.map((x) => x.status)).toEqual(['COMPLETED', 'COMPLETED']);
    const data = async (email: string) => (await dbQuery(svc.databaseUrl, `SELECT data FROM contacts WHERE email = $1`, [email]))[0].data;
    expect((await data('active@flow.test')).followedUp).toBe(true);
    expect((await data('idle@flow.test')).followedUp).toBeUndefined();
    // The timeout is recorded on the wait step of the execution that ran out of time.
    const outcomes = [];
    for (const x of done) outcomes.push((await execution(id, x.id)).steps.find((s: { type: string }) => s.type === 'WAIT_FOR_EVENT').output);
    expect(outcomes).toEqual(expect.arrayContaining([expect.objectContaining({ outcome: 'event' }), { outcome: 'timeout' }]));
  });

  test('re-entry: without it a contact enters once; with it, each event starts one execution; a disabled workflow starts none', async () => {
    const once = await build('ping', [{ name: 'x', type: 'EXIT' }], [['trigger', 'x']]);
    const every = await build('ping', [{ name: 'x', type: 'EXIT' }], [['trigger', 'x']], { allowReentry: true });
    const off = await build('ping', [{ name: 'x', type: 'EXIT' }], [['trigger', 'x']], { enable: false });
    await track('pinger@flow.test', 'ping');
    await track('pinger@flow.test', 'ping');
    await whenDone(every.id, 2);
    await new Promise((r) => setTimeout(r, 500));
    expect((await executions(once.id)).map((x) => x.status)).toEqual(['EXITED']);
    expect(await executions(every.id)).toHaveLength(2);
    expect(await executions(off.id)).toHaveLength(0);
  });

  test('one event never starts two executions, even if its outbox row is handled twice', async () => {
    const w = await build('dup', [{ name: 'x', type: 'EXIT' }], [['trigger', 'x']], { allowReentry: true });
    const res = await track('dup@flow.test', 'dup');
    await whenDone(w.id, 1);
    const [event] = await dbQuery(svc.databaseUrl, `SELECT id, project_id, contact_id, data FROM events WHERE id = $1`, [res.body.data.event]);
    await dbQuery(
      svc.databaseUrl,
      `INSERT INTO automation_outbox (kind, project_id, contact_id, event_id, event_name, event_data, workflow_id) VALUES ('start', $1, $2, $3, 'dup', $4, $5)`,
      [event.project_id, event.contact_id, event.id, event.data, w.id],
    );
    await until(async () =>
      (await dbQuery(svc.databaseUrl, `SELECT 1 FROM automation_outbox WHERE workflow_id = $1`, [w.id])).length === 0 ? true : undefined,
    );
    expect(await executions(w.id)).toHaveLength(1);
  });

  test('an execution whose recording commits late still runs: its workflow waits for the commit', async () => {
    const w = await build('late', [{ name: 'mark', type: 'UPDATE_CONTACT', config: { updates: { late: true } } }], [['trigger', 'mark']]);
    const contact = (await svc.api.post('/contacts', { email: 'late@flow.test' }, key)).body;
    const [row] = await dbQuery(svc.databaseUrl, `SELECT * FROM workflows WHERE id = $1`, [w.id]);
    let started: { id: string } | undefined;
    // The workflow starts inside the transaction, which then stays open for a while before committing.
    await transaction(svc.orm.em.fork(), async (tx) => {
      started = await startExecution(tx, svc.temporal, row as never, { contactId: contact.id, context: {} });
      await new Promise((r) => setTimeout(r, 1500));
    });
    await until(async () => ((await execution(w.id, started!.id)).status === 'COMPLETED' ? true : undefined));
    expect((await svc.api.get(`/contacts/${contact.id}`, key)).body.data).toEqual({ late: true });
  });

  test('system events trigger too: contact.unsubscribed and segment entries', async () => {
    const unsub = await build('contact.unsubscribed', [{ name: 'x', type: 'UPDATE_CONTACT', config: { updates: { farewell: true } } }], [['trigger', 'x']]);
    const c = (await svc.api.post('/contacts', { email: 'leaving@flow.test' }, key)).body;
    await svc.api.patch(`/contacts/${c.id}`, { subscribed: false }, key);
    await whenDone(unsub.id, 1);
    await svc.api.post(
      '/segments',
      {
        name: 'Big Spenders',
        trackMembership: true,
        condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.spent', operator: 'greaterThan', value: 100 }] }] },
      },
      key,
    );
    const entry = await build('segment.big-spenders.entry', [{ name: 'x', type: 'EXIT' }], [['trigger', 'x']]);
    await track('spender@flow.test', 'purchase', { spent: 500 });
    const [x] = await whenDone(entry.id, 1);
    expect(x.context).toMatchObject({ segmentName: 'Big Spenders', trigger: { eventName: 'segment.big-spenders.entry' } });
  });

  test('SEND_EMAIL of a MARKETING template is skipped for an unsubscribed contact; UPDATE_CONTACT and EXIT', async () => {
    const { id } = await build(
      'promo',
      [
        { name: 'news', type: 'SEND_EMAIL', config: { templateId: news.id } },
        { name: 'unsub', type: 'UPDATE_CONTACT', config: { subscriptionAction: 'unsubscribe', updates: { promo: 'seen' } } },
        { name: 'stop', type: 'EXIT', config: { reason: 'done' } },
      ],
      [
        ['trigger', 'news'],
        ['news', 'unsub'],
        ['unsub', 'stop'],
      ],
    );
    await svc.api.post('/contacts', { email: 'optout@flow.test', subscribed: false }, key);
    smtp.received.length = 0;
    await track('optout@flow.test', 'promo');
    await track('optin@flow.test', 'promo');
    const done = await whenDone(id, 2);
    expect(done.map((x) => x.status)).toEqual(['EXITED', 'EXITED']);
    await until(async () => (smtp.received.some((m) => m.envelope.to[0] === 'optin@flow.test') ? true : undefined));
    await new Promise((r) => setTimeout(r, 300));
    const promo = smtp.received.map((m) => m.envelope.to[0]).filter((to) => to.startsWith('opt'));
    expect(promo).toEqual(['optin@flow.test']);
    const skipped = await dbQuery(
      svc.databaseUrl,
      `SELECT s.status, s.output FROM workflow_execution_steps s JOIN workflow_executions x ON x.id = s.execution_id
       JOIN contacts c ON c.id = x.contact_id WHERE c.email = 'optout@flow.test' AND s.type = 'SEND_EMAIL'`,
    );
    expect(skipped).toEqual([{ status: 'SKIPPED', output: { sent: false, reason: expect.stringMatching(/not subscribed/) } }]);
    const [optin] = await dbQuery(svc.databaseUrl, `SELECT subscribed, data FROM contacts WHERE email = 'optin@flow.test'`);
    // (Unsubscribing it also triggered the contact.unsubscribed workflow of an earlier test.)
    expect(optin).toEqual({ subscribed: false, data: expect.objectContaining({ promo: 'seen' }) });
  });

  test('manual start with context; list by status; cancel one and cancel all; delete needs no active execution', async () => {
    const { id } = await build('manual', [{ name: 'long', type: 'DELAY', config: { amount: 30, unit: 'days' } }], [['trigger', 'long']]);
    const c1 = (await svc.api.post('/contacts', { email: 'm1@flow.test' }, key)).body;
    const c2 = (await svc.api.post('/contacts', { email: 'm2@flow.test' }, key)).body;
    const started = await svc.api.post(`/workflows/${id}/executions`, { contactId: c1.id, context: { source: 'admin' } }, key);
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({
      id: expect.any(String),
      workflowId: id,
      contactId: c1.id,
      status: 'RUNNING',
      context: { source: 'admin' },
      createdAt: expect.any(String),
    });
    await svc.api.post(`/workflows/${id}/executions`, { contactId: c2.id }, key);
    expect((await svc.api.post(`/workflows/${id}/executions`, { contactId: '00000000-0000-4000-8000-000000000000' }, key)).status).toBe(404);
    await until(async () => ((await executions(id, 'WAITING')).length === 2 ? true : undefined));
    expect((await svc.api.get(`/workflows/${id}/executions?status=BOGUS`, key)).status).toBe(400);

    expect((await svc.api.delete(`/workflows/${id}`, key)).status).toBe(409);
    const cancelled = await svc.api.delete(`/workflows/${id}/executions/${started.body.id}`, key);
    expect(cancelled.body.status).toBe('CANCELLED');
    const handle = svc.temporal.client.workflow.getHandle(`automation:${started.body.id}`);
    await until(async () => ((await handle.describe()).status.name === 'CANCELLED' ? true : undefined));
    expect((await svc.api.post(`/workflows/${id}/executions/cancel-all`, {}, key)).body).toEqual({ cancelled: 1 });
    expect((await executions(id)).map((x) => x.status)).toEqual(['CANCELLED', 'CANCELLED']);
    expect((await svc.api.delete(`/workflows/${id}`, key)).status).toBe(200);
  });

  test('an execution runs the definition it started with, whatever edits follow', async () => {
    const { id, ids } = await build(
      'snap',
      [
        { name: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'go' } },
        { name: 'mark', type: 'UPDATE_CONTACT', config: { updates: { version: 1 } } },
      ],
      [
        ['trigger', 'wait'],
        ['wait', 'mark', { outcome: 'event' }],
      ],
    );
    await track('snap@flow.test', 'snap');
    await until(async () => ((await executions(id, 'WAITING')).length === 1 ? true : undefined));
    await svc.api.patch(`/workflows/${id}/steps/${ids.mark}`, { config: { updates: { version: 2 } } }, key);
    await svc.api.post(`/workflows/${id}/steps`, { type: 'EXIT', name: 'new' }, key);
    await track('snap@flow.test', 'go');
    await whenDone(id, 1);
    const [row] = await dbQuery(svc.databaseUrl, `SELECT data FROM contacts WHERE email = 'snap@flow.test'`);
    expect(row.data.version).toBe(1);
  });

  test('a webhook failing with 5xx is retried; a refused one fails the execution with the reason', async () => {
    hook.requests.length = 0;
    hook.replies = [500, 503];
    const retried = await build(
      'retry',
      [{ name: 'hook', type: 'WEBHOOK', config: { url: `${hook.url}/r`, method: 'PUT', body: 'plain {{email}}' } }],
      [['trigger', 'hook']],
    );
    await track('retry@flow.test', 'retry');
    const [x] = await whenDone(retried.id, 1);
    expect(x.status).toBe('COMPLETED');
    expect(hook.requests.map((r) => r.body)).toEqual(['plain retry@flow.test', 'plain retry@flow.test', 'plain retry@flow.test']);

    hook.replies = [404];
    const refused = await build('refused', [{ name: 'hook', type: 'WEBHOOK', config: { url: `${hook.url}/missing` } }], [['trigger', 'hook']]);
    await track('refused@flow.test', 'refused');
    const [y] = await whenDone(refused.id, 1);
    expect(y.status).toBe('FAILED');
    expect(y.error).toMatch(/404/);
  });

  test('a template used by a workflow step cannot be deleted', async () => {
    const t = (await svc.api.post('/templates', { name: 'Used', subject: 's', body: 'b', from: 'hi@flow.test' }, key)).body;
    const { id, ids } = await build('usage', [{ name: 'mail', type: 'SEND_EMAIL', config: { templateId: t.id } }], [['trigger', 'mail']], { enable: false });
    const usage = await svc.api.get(`/templates/${t.id}/usage`, key);
    expect(usage.body.workflowSteps).toEqual([{ id: ids.mail, workflowId: id, workflowName: 'On usage' }]);
    expect((await svc.api.delete(`/templates/${t.id}`, key)).status).toBe(409);
    const eventUsage = await svc.api.get('/events/usage/usage', key);
    expect(eventUsage.body.workflows).toEqual([{ id, name: 'On usage', usedAs: 'trigger' }]);
  });
});
