import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
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
  for (const [email, data] of [
    ['a@fields.test', { plan: 'pro', seats: 3, vip: true }],
    ['b@fields.test', { plan: 'pro', seats: 'many' }],
    ['c@fields.test', { plan: 'free' }],
    ['d@fields.test', {}],
  ] as const) {
    await svc.api.post('/contacts', { email, data }, key);
  }
});
afterAll(async () => {
  await svc.stop();
  await dns.stop();
});

const where = (field: string, operator: string, value: unknown) => ({ logic: 'AND', groups: [{ filters: [{ field, operator, value }] }] });

test('GET /contacts/fields: standard fields, then custom fields with their type and coverage', async () => {
  const res = await svc.api.get('/contacts/fields', key);
  expect(res.status).toBe(200);
  expect(res.body.totalContacts).toBe(4);
  expect(res.body.data.slice(0, 4)).toEqual([
    { name: 'email', type: 'string', standard: true, count: 4, coverage: 100 },
    { name: 'subscribed', type: 'boolean', standard: true, count: 4, coverage: 100 },
    { name: 'createdAt', type: 'date', standard: true, count: 4, coverage: 100 },
    { name: 'updatedAt', type: 'date', standard: true, count: 4, coverage: 100 },
  ]);
  expect(res.body.data.slice(4)).toEqual([
    { name: 'plan', type: 'string', standard: false, count: 3, coverage: 75 },
    { name: 'seats', type: expect.stringMatching(/^(number|string)$/), standard: false, count: 2, coverage: 50, types: { number: 1, string: 1 } },
    { name: 'vip', type: 'boolean', standard: false, count: 1, coverage: 25 },
  ]);
});

test('GET /contacts/fields/:field/values: distinct values, most common first; unknown field 404, standard field 400', async () => {
  const res = await svc.api.get('/contacts/fields/plan/values', key);
  expect(res.body).toEqual({
    field: 'plan',
    data: [
      { value: 'pro', count: 2 },
      { value: 'free', count: 1 },
    ],
  });
  expect((await svc.api.get('/contacts/fields/nothing/values', key)).status).toBe(404);
  expect((await svc.api.get('/contacts/fields/email/values', key)).status).toBe(400);
});

test('GET /contacts/fields/:field/usage: segments, campaigns and workflows that name the field', async () => {
  const segment = (await svc.api.post('/segments', { name: 'Pros', condition: where('data.plan', 'equals', 'pro') }, key)).body;
  await svc.api.post('/segments', { name: 'Seats', condition: where('data.seats', 'greaterThan', 1) }, key);
  // A nested path under the field is a reference; a filter value that only reads like the field is none.
  const tiers = (await svc.api.post('/segments', { name: 'Tiers', condition: where('data.plan.tier', 'exists', undefined) }, key)).body;
  await svc.api.post('/segments', { name: 'Notes', condition: where('data.note', 'equals', 'data.plan') }, key);
  await verifiedDomain(svc.api, dns, acct.project.secretKey, 'fields.test');
  const campaign = (
    await svc.api.post(
      '/campaigns',
      { name: 'Upgrade', subject: 'Your {{ data.plan ?? free }} plan', body: '<p>Hi</p>', from: 'news@fields.test', audienceType: 'ALL' },
      key,
    )
  ).body.data;
  await svc.api.post('/campaigns', { name: 'Other', subject: 'Hello {{planet}}', body: '<p>Hi</p>', from: 'news@fields.test', audienceType: 'ALL' }, key);
  const workflow = (await svc.api.post('/workflows', { name: 'Flag', eventName: 'upgraded' }, key)).body;
  await svc.api.post(`/workflows/${workflow.id}/steps`, { type: 'UPDATE_CONTACT', name: 'set', config: { updates: { plan: 'team' } } }, key);

  const res = await svc.api.get('/contacts/fields/plan/usage', key);
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    field: 'plan',
    segments: [
      { id: segment.id, name: 'Pros' },
      { id: tiers.id, name: 'Tiers' },
    ],
    campaigns: [{ id: campaign.id, name: 'Upgrade' }],
    workflows: [{ id: workflow.id, name: 'Flag', usedAs: 'update_contact' }],
    total: 4,
  });
});

test('DELETE /contacts/fields/:field removes it from every contact of the project, and only this project', async () => {
  const other = await createAccount(svc.api);
  await svc.api.post('/contacts', { email: 'x@fields.test', data: { vip: true } }, { key: other.project.secretKey });
  const res = await svc.api.delete('/contacts/fields/vip', key);
  expect(res.body).toEqual({ field: 'vip', deleted: true, contactsUpdated: 1 });
  const rows = await dbQuery(svc.databaseUrl, `SELECT project_id, data ? 'vip' AS has FROM contacts WHERE email LIKE '%@fields.test' ORDER BY email`);
  expect(rows.filter((r) => r.has).map((r) => r.project_id)).toEqual([other.project.id]);
  expect((await svc.api.delete('/contacts/fields/vip', key)).status).toBe(404);
  expect((await svc.api.delete('/contacts/fields/subscribed', key)).status).toBe(400);
});
