import { dbQuery } from '../setup/db';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let svc: TestService;
let acct: Account;
beforeAll(async () => {
  svc = await startTestService();
  acct = await createAccount(svc.api);
});
afterAll(() => svc.stop());

async function upload(csv: string | Buffer, field = 'file', account = acct) {
  const form = new FormData();
  form.append(field, new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
  const res = await fetch(`${svc.api.baseUrl}/contacts/import`, {
    method: 'POST',
    body: form,
    headers: { authorization: `Bearer ${account.project.secretKey}` },
  });
  return { status: res.status, body: (await res.json()) as any };
}

async function finished(jobId: string) {
  return until(
    async () => {
      const res = await svc.api.get(`/contacts/import/${jobId}`, { key: acct.project.secretKey });
      expect(res.status).toBe(200);
      return res.body.status === 'COMPLETED' || res.body.status === 'FAILED' ? res.body : undefined;
    },
    60_000,
    `import ${jobId}`,
  );
}

test('a CSV with an email header: valid rows imported with typed data, invalid rows reported by line, existing contacts merged', async () => {
  const existing = await svc.api.post('/contacts', { email: 'old@import.test', subscribed: false, data: { keep: 'me' } }, { key: acct.project.secretKey });
  const csv = [
    '\uFEFFname,Email,plan,seats,vip',
    'Ann,ann@import.test,pro,3,true',
    'Bob,not-an-email,free,1,false',
    'Old,OLD@import.test,team,,false',
    '"Smith, Jo",jo@import.test,"free ""trial""",2,false',
    'short,row',
  ].join('\n');
  const res = await upload(csv);
  expect(res.status).toBe(202);
  expect(res.body).toMatchObject({ jobId: expect.any(String), filename: 'contacts.csv' });
  const job = await finished(res.body.jobId);
  expect(job).toMatchObject({ status: 'COMPLETED', rows: 5, imported: 3, created: 2, updated: 1, invalid: 2 });
  expect(job.errors).toEqual([
    { line: 3, error: expect.stringContaining('invalid email') },
    { line: 6, error: 'expected 5 fields, found 2' },
  ]);
  const rows = await dbQuery(
    svc.databaseUrl,
    `SELECT email, subscribed, data FROM contacts WHERE project_id = $1 AND email LIKE '%@import.test' ORDER BY email`,
    [acct.project.id],
  );
  expect(rows).toEqual([
    { email: 'ann@import.test', subscribed: true, data: { name: 'Ann', plan: 'pro', seats: 3, vip: true } },
    { email: 'jo@import.test', subscribed: true, data: { name: 'Smith, Jo', plan: 'free "trial"', seats: 2, vip: false } },
    { email: 'old@import.test', subscribed: false, data: { keep: 'me', name: 'Old', plan: 'team', vip: false } },
  ]);
  expect(existing.status).toBe(201);
  const workflow = await svc.temporal.client.workflow.getHandle(`contact-import:${res.body.jobId}`).describe();
  expect(workflow.status.name).toBe('COMPLETED');
  // The file is not kept once imported.
  const [stored] = await dbQuery(svc.databaseUrl, `SELECT content IS NULL AS gone FROM contact_imports WHERE id = $1`, [res.body.jobId]);
  expect(stored.gone).toBe(true);
});

test('without a header the first column is the address; a file larger than one slice imports every row once', async () => {
  const lines = Array.from({ length: 12_000 }, (_, i) => `bulk${i}@headerless.test,${'x'.repeat(20)}`);
  const job = await finished((await upload(lines.join('\r\n') + '\r\n')).body.jobId);
  expect(job).toMatchObject({ status: 'COMPLETED', rows: 12_000, created: 12_000, invalid: 0 });
  const [{ n }] = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM contacts WHERE project_id = $1 AND email LIKE '%@headerless.test'`, [
    acct.project.id,
  ]);
  expect(n).toBe(12_000);
});

test('over 5 MB is 413 with a clear message; no file is 422; nothing is queued', async () => {
  const before = await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM contact_imports`);
  const big = await upload(Buffer.alloc(5 * 1024 * 1024 + 1, 'a'));
  expect(big.status).toBe(413);
  expect(big.body.error).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', message: expect.stringContaining('5 MB') });
  const missing = await upload('email\na@b.co', 'other');
  expect(missing.status).toBe(422);
  expect(missing.body.error.errors).toEqual([expect.objectContaining({ field: 'file' })]);
  expect(await dbQuery(svc.databaseUrl, `SELECT count(*)::int AS n FROM contact_imports`)).toEqual(before);
  expect((await svc.api.get(`/contacts/import/${crypto.randomUUID()}`, { key: acct.project.secretKey })).status).toBe(404);
});
