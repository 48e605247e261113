import { caughtMail, mailedToken } from '../setup/mailbox';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
let owner: Account;
beforeAll(async () => {
  svc = await startTestService();
  owner = await createAccount(svc.api, 'Team');
});
afterAll(() => svc.stop());

const as = (cookie: string) => ({ cookie });
const members = async (account = owner) => (await svc.api.get(`/projects/${account.project.id}/members`, as(account.cookie))).body.data;

/** A signed-up user with a verified address. */
async function verifiedUser(email: string): Promise<{ cookie: string; id: string }> {
  const signup = await svc.api.post('/auth/signup', { email, password: 'team password' });
  await svc.api.post('/auth/verify-email', { token: await mailedToken(svc, email, 'Verify your email address') });
  return { cookie: (signup.headers.get('set-cookie') ?? '').split(';')[0], id: signup.body.id };
}

test('a verified account is added at once; an unknown address becomes a member only once it is verified', async () => {
  const admin = await verifiedUser('admin@team.test');
  const added = await svc.api.post(`/projects/${owner.project.id}/members`, { email: 'admin@team.test', role: 'ADMIN' }, as(owner.cookie));
  expect(added.status).toBe(201);
  expect(added.body).toMatchObject({ id: admin.id, userId: admin.id, email: 'admin@team.test', role: 'ADMIN', status: 'ACTIVE' });
  expect((await caughtMail(svc, 'admin@team.test', 'You are invited to Team')).text).toContain('as ADMIN');
  expect((await svc.api.post(`/projects/${owner.project.id}/members`, { email: 'admin@team.test' }, as(owner.cookie))).status).toBe(409);

  const invited = await svc.api.post(`/projects/${owner.project.id}/members`, { email: 'later@team.test' }, as(admin.cookie));
  expect(invited.body).toMatchObject({ userId: null, email: 'later@team.test', role: 'MEMBER', status: 'INVITED' });
  // Signing up with the address is not enough: someone else could have typed it.
  const signup = await svc.api.post('/auth/signup', { email: 'later@team.test', password: 'team password' });
  const laterCookie = (signup.headers.get('set-cookie') ?? '').split(';')[0];
  expect((await svc.api.get('/users/@me/projects', as(laterCookie))).body).toEqual([]);
  await svc.api.post('/auth/verify-email', { token: await mailedToken(svc, 'later@team.test', 'Verify your email address') });
  expect((await svc.api.get('/users/@me/projects', as(laterCookie))).body).toEqual([expect.objectContaining({ id: owner.project.id, role: 'MEMBER' })]);
  expect((await members()).map((m: { email: string; status: string }) => [m.email, m.status])).toEqual([
    [owner.user.email, 'ACTIVE'],
    ['admin@team.test', 'ACTIVE'],
    ['later@team.test', 'ACTIVE'],
  ]);
});

test('the permission table: MEMBER manages nothing, ADMIN cannot touch OWNER, the last OWNER stays', async () => {
  const list = await members();
  const admin = list.find((m: { email: string }) => m.email === 'admin@team.test');
  const member = list.find((m: { email: string }) => m.email === 'later@team.test');
  const ownerId = list.find((m: { role: string }) => m.role === 'OWNER').id;
  const memberCookie = (await svc.api.post('/auth/login', { email: 'later@team.test', password: 'team password' })).headers.get('set-cookie')!.split(';')[0];
  const adminCookie = (await svc.api.post('/auth/login', { email: 'admin@team.test', password: 'team password' })).headers.get('set-cookie')!.split(';')[0];
  const project = `/projects/${owner.project.id}/members`;

  expect((await svc.api.post(project, { email: 'x@team.test' }, as(memberCookie))).status).toBe(403);
  expect((await svc.api.patch(`${project}/${admin.id}`, { role: 'MEMBER' }, as(memberCookie))).status).toBe(403);
  expect((await svc.api.post(`/users/@me/projects/${owner.project.id}/regenerate-keys`, {}, as(memberCookie))).status).toBe(403);
  expect((await svc.api.get(project, as(memberCookie))).status).toBe(200);

  expect((await svc.api.patch(`${project}/${member.id}`, { role: 'OWNER' }, as(adminCookie))).status).toBe(403);
  expect((await svc.api.delete(`${project}/${ownerId}`, as(adminCookie))).status).toBe(403);
  const promoted = await svc.api.patch(`${project}/${member.id}`, { role: 'ADMIN' }, as(adminCookie));
  expect(promoted.body).toMatchObject({ id: member.id, role: 'ADMIN' });

  const demoteLast = await svc.api.patch(`${project}/${ownerId}`, { role: 'ADMIN' }, as(owner.cookie));
  expect(demoteLast.status).toBe(409);
  expect(demoteLast.body.error.code).toBe('LAST_OWNER');
  expect((await svc.api.delete(`${project}/${ownerId}`, as(owner.cookie))).status).toBe(409);

  // With a second OWNER, the first may step down; anyone may leave.
  expect((await svc.api.patch(`${project}/${admin.id}`, { role: 'OWNER' }, as(owner.cookie))).status).toBe(200);
  expect((await svc.api.patch(`${project}/${ownerId}`, { role: 'MEMBER' }, as(owner.cookie))).status).toBe(200);
  expect((await svc.api.delete(`${project}/${ownerId}`, as(owner.cookie))).body).toEqual({ id: ownerId, deleted: true });
  expect((await svc.api.get(project, as(owner.cookie))).status).toBe(404);
});

test('invitations can be withdrawn; another project’s members are invisible; bad input is 422', async () => {
  const other = await createAccount(svc.api, 'Elsewhere');
  const inv = await svc.api.post(`/projects/${other.project.id}/members`, { email: 'maybe@team.test', role: 'MEMBER' }, as(other.cookie));
  expect((await svc.api.delete(`/projects/${other.project.id}/members/${inv.body.id}`, as(other.cookie))).status).toBe(200);
  expect((await members(other)).map((m: { email: string }) => m.email)).toEqual([other.user.email]);
  expect((await svc.api.get(`/projects/${other.project.id}/members`, as(owner.cookie))).status).toBe(404);
  expect((await svc.api.post(`/projects/${other.project.id}/members`, { email: 'nope' }, as(other.cookie))).status).toBe(422);
  expect((await svc.api.post(`/projects/${other.project.id}/members`, { email: 'a@b.co', role: 'KING' }, as(other.cookie))).status).toBe(422);
});
