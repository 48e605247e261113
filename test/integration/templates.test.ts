import { ZoneDnsServer } from '../../src/dns/zone-server';
import { verifiedDomain } from '../setup/sender';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let dns: ZoneDnsServer;
let svc: TestService;
let acct: Account;
let key: { key: string };
beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  svc = await startTestService({ DNS_SERVERS: dns.address });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'send.example.test');
});
afterAll(async () => {
  await svc.stop();
  await dns.stop();
});

const base = { name: 'Welcome', subject: 'Hi {{name}}', body: '<p>Hello {{name ?? there}}</p>', from: 'hello@send.example.test' };

test('create with defaults; get; missing required fields are 400 { error }', async () => {
  const res = await svc.api.post('/templates', { ...base, description: 'internal', fromName: 'Team' }, key);
  expect(res.status).toBe(201);
  expect(res.body).toMatchObject({ ...base, description: 'internal', fromName: 'Team', replyTo: null, type: 'MARKETING', projectId: acct.project.id });
  expect((await svc.api.get(`/templates/${res.body.id}`, key)).body.id).toBe(res.body.id);

  const missing = await svc.api.post('/templates', { name: 'x', body: 'y' }, key);
  expect(missing.status).toBe(400);
  expect(missing.body).toEqual({ error: 'Missing required fields: subject, from' });
  const bad = await svc.api.post('/templates', { ...base, subject: 'two\nlines', replyTo: 'nope', type: 'SPAM' }, key);
  expect(bad.status).toBe(422);
  expect(bad.body.error.errors.map((e: any) => e.field).sort()).toEqual(['replyTo', 'subject', 'type']);
});

test('the sender domain must be registered and verified: 403', async () => {
  const unknown = await svc.api.post('/templates', { ...base, from: 'a@elsewhere.test' }, key);
  expect(unknown.status).toBe(403);
  expect(unknown.body.error).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', statusCode: 403, details: { reason: 'DOMAIN_NOT_REGISTERED' } });
  await svc.api.post('/domains', { domain: 'pending.example.test' }, key);
  const pending = await svc.api.post('/templates', { ...base, from: 'a@pending.example.test' }, key);
  expect(pending.status).toBe(403);
  expect(pending.body.error.details.reason).toBe('DOMAIN_NOT_VERIFIED');
  // A subdomain of a verified domain is not the verified domain.
  expect((await svc.api.post('/templates', { ...base, from: 'a@sub.send.example.test' }, key)).status).toBe(403);

  const t = (await svc.api.post('/templates', base, key)).body;
  expect((await svc.api.patch(`/templates/${t.id}`, { from: 'x@elsewhere.test' }, key)).status).toBe(403);
});

test('PATCH, duplicate, usage, delete; another project sees none of it', async () => {
  const t = (await svc.api.post('/templates', base, key)).body;
  const patched = await svc.api.patch(`/templates/${t.id}`, { subject: 'New', type: 'TRANSACTIONAL', description: null }, key);
  expect(patched.body).toMatchObject({ subject: 'New', type: 'TRANSACTIONAL', description: null, body: base.body });
  const dup = await svc.api.post(`/templates/${t.id}/duplicate`, {}, key);
  expect(dup.status).toBe(201);
  expect(dup.body).toMatchObject({ name: 'Welcome (copy)', subject: 'New', type: 'TRANSACTIONAL' });
  expect(dup.body.id).not.toBe(t.id);
  expect((await svc.api.get(`/templates/${t.id}/usage`, key)).body).toEqual({ templateId: t.id, campaigns: [], workflowSteps: [], total: 0 });

  const other = await createAccount(svc.api, 'Other');
  const otherKey = { key: other.project.secretKey };
  expect((await svc.api.get(`/templates/${t.id}`, otherKey)).status).toBe(404);
  expect((await svc.api.patch(`/templates/${t.id}`, { name: 'x' }, otherKey)).status).toBe(404);
  expect((await svc.api.delete(`/templates/${t.id}`, otherKey)).status).toBe(404);
  expect((await svc.api.post(`/templates/${t.id}/duplicate`, {}, otherKey)).status).toBe(404);

  expect((await svc.api.delete(`/templates/${t.id}`, key)).body).toEqual({ id: t.id, deleted: true });
  expect((await svc.api.get(`/templates/${t.id}`, key)).status).toBe(404);
});

test('GET /templates: offset pages, type filter, search, sort', async () => {
  const p = await createAccount(svc.api, 'Lister');
  const k = { key: p.project.secretKey };
  await verifiedDomain(svc.api, dns, p.project.secretKey, 'list.example.test');
  for (let i = 0; i < 25; i++) {
    await svc.api.post(
      '/templates',
      {
        ...base,
        from: 'a@list.example.test',
        name: `T${String(i).padStart(2, '0')}`,
        type: i % 5 === 0 ? 'TRANSACTIONAL' : 'MARKETING',
        description: i === 7 ? 'Needle here' : undefined,
      },
      k,
    );
  }
  const first = await svc.api.get('/templates', k);
  expect(first.body).toMatchObject({ total: 25, page: 1, pageSize: 20, totalPages: 2 });
  expect(first.body.data[0].name).toBe('T24');
  const second = await svc.api.get('/templates?page=2&pageSize=20', k);
  expect(second.body.data.map((t: any) => t.name)).toEqual(['T04', 'T03', 'T02', 'T01', 'T00']);
  expect((await svc.api.get('/templates?type=TRANSACTIONAL', k)).body.total).toBe(5);
  expect((await svc.api.get('/templates?type=NOPE', k)).status).toBe(400);
  expect((await svc.api.get('/templates?search=needle', k)).body.data.map((t: any) => t.name)).toEqual(['T07']);
  const byName = await svc.api.get('/templates?sort=name&dir=asc&pageSize=3', k);
  expect(byName.body.data.map((t: any) => t.name)).toEqual(['T00', 'T01', 'T02']);
  expect((await svc.api.get('/templates?pageSize=500', k)).body.pageSize).toBe(100);
  expect((await svc.api.get('/templates?page=0&pageSize=-1', k)).body).toMatchObject({ page: 1, pageSize: 20 });
});

test('a domain used by a template cannot be deleted (409)', async () => {
  const p = await createAccount(svc.api, 'Deleter');
  const k = { key: p.project.secretKey };
  const d = await verifiedDomain(svc.api, dns, p.project.secretKey, 'busy.example.test');
  const t = (await svc.api.post('/templates', { ...base, from: 'a@busy.example.test' }, k)).body;
  const refused = await svc.api.delete(`/domains/${d.id}`, k);
  expect(refused.status).toBe(409);
  expect(refused.body.error).toMatchObject({ code: 'DOMAIN_IN_USE', details: { templates: [{ id: t.id, name: 'Welcome' }] } });
  await svc.api.delete(`/templates/${t.id}`, k);
  expect((await svc.api.delete(`/domains/${d.id}`, k)).status).toBe(200);
});
