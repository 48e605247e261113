import { dbQuery } from '../setup/db';
import { createAccount, startTestService, type TestService } from '../setup/service';

let a: TestService;
let b: TestService;
beforeAll(async () => {
  a = await startTestService({}, 'api');
  b = await startTestService({ DATABASE_URL: a.databaseUrl }, 'api');
});
afterAll(async () => {
  await b.stop();
  await a.stop();
});

async function eventually(check: () => Promise<boolean>, ms = 2000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return check();
}

test('keys rotated through one API process are refused by another that had them cached', async () => {
  const acct = await createAccount(a.api);
  const old = { key: acct.project.secretKey };
  expect((await b.api.get('/contacts', old)).status).toBe(200);
  expect((await b.api.get('/contacts', old)).status).toBe(200);

  const rotated = await a.api.post(`/users/@me/projects/${acct.project.id}/regenerate-keys`, {}, { cookie: acct.cookie });
  expect((await a.api.get('/contacts', old)).status).toBe(401);
  expect(await eventually(async () => (await b.api.get('/contacts', old)).status === 401)).toBe(true);
  expect((await b.api.get('/contacts', { key: rotated.body.secretKey })).status).toBe(200);
});

test('a project disabled by hand in the database is refused by processes that had its key cached', async () => {
  const acct = await createAccount(a.api);
  const key = { key: acct.project.secretKey };
  expect((await b.api.get('/contacts', key)).status).toBe(200);
  await dbQuery(a.databaseUrl, 'UPDATE projects SET disabled = true WHERE id = $1', [acct.project.id]);
  expect(await eventually(async () => (await b.api.get('/contacts', key)).status === 403)).toBe(true);
  await dbQuery(a.databaseUrl, 'UPDATE projects SET disabled = false WHERE id = $1', [acct.project.id]);
  expect(await eventually(async () => (await b.api.get('/contacts', key)).status === 200)).toBe(true);
});
