import crypto from 'node:crypto';
import { dbQuery } from '../setup/db';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let dns: ZoneDnsServer;
let svc: TestService;
let acct: Account;
let key: { key: string };
beforeAll(async () => {
  dns = await new ZoneDnsServer().start();
  svc = await startTestService({ DNS_SERVERS: dns.address, DOMAIN_CHECK_INTERVAL_SECONDS: '1', SPF_INCLUDE: 'spf.postbox.test' });
  acct = await createAccount(svc.api);
  key = { key: acct.project.secretKey };
});
afterAll(async () => {
  await svc.stop();
  await dns.stop();
});

/** Publishes a domain's records (all, or those of the given purposes) in the test DNS zone. */
function publish(records: Array<{ name: string; value: string; purpose: string }>, purposes?: string[]) {
  for (const r of records) if (!purposes || purposes.includes(r.purpose)) dns.add(r.name, 'TXT', r.value);
}

const eventually = <T>(probe: () => Promise<T | undefined>, ms = 20_000) => until(probe, ms);

test('POST /domains answers a pending domain with the records to publish, in the contract shape', async () => {
  const res = await svc.api.post('/domains', { domain: ' Mail.Example.TEST. ' }, key);
  expect(res.status).toBe(201);
  expect(res.body).toMatchObject({ domain: 'mail.example.test', status: 'pending', verified: false, verifiedAt: null });
  const selector = res.body.dkimSelector;
  expect(selector).toMatch(/^postbox-[0-9a-f]{6}$/);
  expect(res.body.records).toEqual([
    {
      type: 'TXT',
      name: '_postbox-verification.mail.example.test',
      value: expect.stringMatching(/^postbox-verification=[0-9a-f]{40}$/),
      required: true,
      purpose: 'ownership',
    },
    {
      type: 'TXT',
      name: `${selector}._domainkey.mail.example.test`,
      value: expect.stringMatching(/^v=DKIM1; k=rsa; p=[A-Za-z0-9+/=]+$/),
      required: true,
      purpose: 'dkim',
    },
    { type: 'TXT', name: 'mail.example.test', value: 'v=spf1 include:spf.postbox.test ~all', required: true, purpose: 'spf' },
    { type: 'TXT', name: '_dmarc.mail.example.test', value: 'v=DMARC1; p=none;', required: false, purpose: 'dmarc' },
    // Where bounces and complaints come back (never required: until found, mail keeps the From address as envelope sender).
    { type: 'MX', name: 'bounces.mail.example.test', value: '127.0.0.1', priority: 10, required: false, purpose: 'return-path' },
    { type: 'TXT', name: 'bounces.mail.example.test', value: 'v=spf1 include:spf.postbox.test ~all', required: false, purpose: 'return-path-spf' },
    // Where mail to any address at inbound.<domain> is received (never required: a domain may only send).
    { type: 'MX', name: 'inbound.mail.example.test', value: '127.0.0.1', priority: 10, required: false, purpose: 'inbound' },
  ]);
  expect(res.body.returnPath).toEqual({ host: 'bounces.mail.example.test', verified: false });
  const p = /p=(.+)$/.exec(res.body.records[1].value)![1];
  const publicKey = crypto.createPublicKey({ key: Buffer.from(p, 'base64'), format: 'der', type: 'spki' });
  expect(publicKey.asymmetricKeyType).toBe('rsa');
  expect(publicKey.asymmetricKeyDetails?.modulusLength).toBe(2048);
});

test('bad input is 422, a duplicate 409', async () => {
  for (const domain of ['localhost', 'not a domain', '-bad-.example', 'a..b.com', '']) {
    const res = await svc.api.post('/domains', { domain }, key);
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('domain');
  }
  await svc.api.post('/domains', { domain: 'dup.example.test' }, key);
  const dup = await svc.api.post('/domains', { domain: 'DUP.example.test' }, key);
  expect(dup.status).toBe(409);
  expect(dup.body.error.code).toBe('DOMAIN_EXISTS');
});

test('GET /domains/:id/verify checks now: verified exactly when every required record resolves with its value', async () => {
  const created = (await svc.api.post('/domains', { domain: 'check.example.test' }, key)).body;
  const first = await svc.api.get(`/domains/${created.id}/verify`, key);
  expect(first.status).toBe(200);
  expect(first.body.status).toBe('pending');
  expect(first.body.records.map((r: any) => r.status)).toEqual(['pending', 'pending', 'pending', 'pending', 'pending', 'pending', 'pending']);

  // DMARC is recommended, not required; an SPF record may carry other mechanisms too.
  publish(created.records, ['ownership', 'dkim']);
  dns.add('check.example.test', 'TXT', 'v=spf1 include:_spf.google.com include:spf.postbox.test -all');
  const second = await svc.api.get(`/domains/${created.id}/verify`, key);
  expect(second.body.status).toBe('verified');
  expect(second.body.verified).toBe(true);
  expect(second.body.verifiedAt).toEqual(expect.any(String));
  expect(second.body.records.map((r: any) => [r.purpose, r.status])).toEqual([
    ['ownership', 'verified'],
    ['dkim', 'verified'],
    ['spf', 'verified'],
    ['dmarc', 'pending'],
    ['return-path', 'pending'],
    ['return-path-spf', 'pending'],
    ['inbound', 'pending'],
  ]);
  expect(second.body.returnPath.verified).toBe(false);
});

test('a wrong DKIM key or a missing SPF mechanism keeps the domain pending', async () => {
  const created = (await svc.api.post('/domains', { domain: 'wrong.example.test' }, key)).body;
  publish(created.records, ['ownership', 'spf']);
  const other = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  dns.add(created.records[1].name, 'TXT', `v=DKIM1; k=rsa; p=${other}`);
  const res = await svc.api.get(`/domains/${created.id}/verify`, key);
  expect(res.body.status).toBe('pending');
  expect(res.body.records[1]).toMatchObject({ purpose: 'dkim', status: 'pending', found: [expect.stringContaining(other.slice(0, 20))] });
});

test('a DNS failure never verifies nor unverifies; a record DNS says is gone does', async () => {
  const created = (await svc.api.post('/domains', { domain: 'flaky.example.test' }, key)).body;
  publish(created.records);
  expect((await svc.api.get(`/domains/${created.id}/verify`, key)).body.status).toBe('verified');

  const blind = await startTestService({ DNS_SERVERS: '127.0.0.1:9', DATABASE_URL: svc.databaseUrl, DOMAIN_CHECK_INTERVAL_SECONDS: '3600' }, 'api');
  try {
    const res = await blind.api.get(`/domains/${created.id}/verify`, key);
    expect(res.body.status).toBe('verified');
    expect(res.body.records[0]).toMatchObject({ status: 'error', error: expect.any(String) });
  } finally {
    await blind.stop();
  }

  dns.zone.delete('_postbox-verification.flaky.example.test');
  const gone = await svc.api.get(`/domains/${created.id}/verify`, key);
  expect(gone.body.status).toBe('pending');
  expect(gone.body.verifiedAt).toBeNull();
});

test('the background workflow verifies a domain once its records appear, and stops when it is deleted', async () => {
  const created = (await svc.api.post('/domains', { domain: 'bg.example.test' }, key)).body;
  const handle = svc.temporal.client.workflow.getHandle(`domain-verification:${created.id}`);
  const description = await handle.describe();
  expect(description.status.name).toBe('RUNNING');
  expect(description.searchAttributes.ProjectId).toEqual([acct.project.id]);
  expect(description.searchAttributes.DomainId).toEqual([created.id]);

  publish(created.records);
  await eventually(async () => {
    const [row] = await dbQuery(svc.databaseUrl, 'SELECT status FROM domains WHERE id = $1', [created.id]);
    return row.status === 'verified' ? true : undefined;
  });

  const del = await svc.api.delete(`/domains/${created.id}`, key);
  expect(del.body).toEqual({ id: created.id, deleted: true });
  await eventually(async () => ((await handle.describe()).status.name !== 'RUNNING' ? true : undefined));
  expect((await svc.api.get(`/domains/${created.id}/verify`, key)).status).toBe(404);
});

test('GET /domains/project/:projectId lists the project’s domains, verified and pending, and only the key’s own project', async () => {
  const mine = await createAccount(svc.api, 'Lister');
  const k = { key: mine.project.secretKey };
  await svc.api.post('/domains', { domain: 'waiting.lister.test' }, k);
  const ready = (await svc.api.post('/domains', { domain: 'ready.lister.test' }, k)).body;
  publish(ready.records);
  expect((await svc.api.get(`/domains/${ready.id}/verify`, k)).body.status).toBe('verified');
  const other = await createAccount(svc.api, 'Other');
  await svc.api.post('/domains', { domain: 'theirs.example.test' }, { key: other.project.secretKey });

  const res = await svc.api.get(`/domains/project/${mine.project.id}`, k);
  expect(res.status).toBe(200);
  expect(res.body.map((d: any) => [d.domain, d.status, d.verified]).sort()).toEqual([
    ['ready.lister.test', 'verified', true],
    ['waiting.lister.test', 'pending', false],
  ]);
  expect((await svc.api.get(`/domains/project/${other.project.id}`, k)).status).toBe(404);
  expect((await svc.api.get('/domains/project/nope', k)).status).toBe(422);
});
