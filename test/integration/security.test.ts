import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ZoneDnsServer } from '../../src/dns/zone-server';
import { dbQuery } from '../setup/db';
import { verifiedDomain } from '../setup/sender';
import { createAccount, startTestService, type TestService } from '../setup/service';
import { SmtpSink } from '../setup/smtp-sink';
import { sesAcceptText, sesEvent, SnsStandIn } from '../setup/sns';
import { until } from '../setup/until';

let sns: SnsStandIn;
let dns: ZoneDnsServer;
let smtp: SmtpSink;
let svc: TestService;

// Small thresholds so a handful of emails is judged: at least 4 sent, above 25% permanent bounces or 10% complaints
// (from any one recipient domain: the rules for complaints are complaint-suspension.test.ts's).
beforeAll(async () => {
  sns = await new SnsStandIn().start();
  dns = await new ZoneDnsServer().start();
  smtp = await new SmtpSink().start();
  smtp.acceptText = sesAcceptText;
  svc = await startTestService({
    DNS_SERVERS: dns.address,
    SMTP_URL: smtp.url,
    SNS_CERT_HOSTS: sns.host,
    SECURITY_MIN_SENT: '4',
    SECURITY_BOUNCE_RATE: '0.25',
    SECURITY_COMPLAINT_RATE: '0.1',
    SECURITY_MIN_COMPLAINT_DOMAINS: '1',
  });
});
afterAll(async () => {
  await svc.stop();
  await smtp.stop();
  await dns.stop();
  sns.stop();
});

async function sender(name: string) {
  const acct = await createAccount(svc.api, name);
  const domain = `${name.toLowerCase()}.test`;
  await verifiedDomain(svc.api, dns, acct.project.secretKey, domain);
  const send = async (to: string) => {
    const res = await svc.api.post('/v1/send', { to, from: `hi@${domain}`, subject: 's', body: 'b' }, { key: acct.project.secretKey });
    if (res.status !== 200) return res;
    const id = res.body.data.emails[0].email;
    const row = await until(async () => {
      const [r] = await dbQuery(svc.databaseUrl, 'SELECT status, provider_message_id FROM emails WHERE id = $1', [id]);
      return r.status === 'SENT' ? r : undefined;
    });
    return { ...res, ses: row.provider_message_id as string };
  };
  const notify = (type: string, ses: string, extra?: Record<string, unknown>) =>
    svc.api.request('POST', '/webhooks/sns', {
      raw: JSON.stringify(sns.signed({ Type: 'Notification', Message: sesEvent(type, ses, extra) })),
      headers: { 'content-type': 'text/plain' },
    });
  const security = async (p = `/projects/${acct.project.id}/security`) => (await svc.api.get(p, { cookie: acct.cookie })).body;
  return { acct, send, notify, security };
}

test('rates over the window: only permanent bounces count; below the minimum volume nothing is judged', async () => {
  const s = await sender('Steady');
  const sent = [];
  for (let i = 0; i < 3; i++) sent.push(await s.send(`r${i}@example.org`));
  await s.notify('Bounce', (sent[0] as any).ses, { bounce: { bounceType: 'Permanent' } });
  await s.notify('Bounce', (sent[1] as any).ses, { bounce: { bounceType: 'Transient' } });
  const state = await s.security();
  expect(state).toMatchObject({
    projectId: s.acct.project.id,
    status: 'ok', // one bounce in three is 33%, but three emails are below the minimum of four
    disabled: false,
    sent: 3,
    bounced: 1,
    complained: 0,
    bounceRate: 0.3333,
    thresholds: { bounceRate: 0.25, complaintRate: 0.1, minSent: 4 },
    suspensions: [],
  });
  expect(state.window.days).toBe(7);
  // The same answer under /users/@me.
  const mine = await s.security(`/users/@me/projects/${s.acct.project.id}/security`);
  expect({ ...mine, window: null }).toEqual({ ...state, window: null }); // the window ends now, so it moves
});

test('a bounce rate above the threshold suspends the project: its keys get 403 and the suspension is listed; an operator lifts it', async () => {
  const s = await sender('Bouncy');
  const key = { key: s.acct.project.secretKey };
  const sent: any[] = [];
  for (let i = 0; i < 5; i++) sent.push(await s.send(`b${i}@example.org`));
  await s.notify('Bounce', sent[0].ses, { bounce: { bounceType: 'Permanent' } });
  expect(await s.security()).toMatchObject({ status: 'at_risk', bounced: 1, sent: 5, bounceRate: 0.2, disabled: false }); // half the threshold or more
  await s.notify('Bounce', sent[1].ses, { bounce: { bounceType: 'Permanent' } });

  const state = await s.security();
  expect(state).toMatchObject({ status: 'suspended', disabled: true, bounced: 2, bounceRate: 0.4 });
  expect(state.disabledReason).toMatch(/^Suspended: bounce rate 40% of 5 emails sent since .* is above 25%$/);
  expect(state.suspensions).toEqual([
    expect.objectContaining({ metric: 'bounce', rate: 0.4, threshold: 0.25, sent: 5, bounced: 2, complained: 0, liftedAt: null, liftedBy: null }),
  ]);
  const refused = await until(async () => {
    const res = await svc.api.get('/contacts', key);
    return res.status === 403 ? res : undefined;
  });
  expect(refused.body.error).toMatchObject({ code: 'PROJECT_DISABLED', message: expect.stringContaining('bounce rate 40%') });
  expect((await s.send('after@example.org')).status).toBe(403);
  // A further bounce does not suspend twice.
  await s.notify('Bounce', sent[2].ses, { bounce: { bounceType: 'Permanent' } });
  expect((await s.security()).suspensions).toHaveLength(1);

  const cli = execFileSync(process.execPath, [path.resolve('dist/src/cli/index.js'), 'reinstate-project', '--project', s.acct.project.id, '--by', 'ops'], {
    env: { ...process.env, DATABASE_URL: svc.databaseUrl },
    encoding: 'utf8',
  });
  expect(cli).toContain('1 suspension(s) lifted');
  await until(async () => ((await svc.api.get('/contacts', key)).status === 200 ? true : undefined));
  const after = await s.security();
  // Judged afresh from the reinstatement: the old bounces no longer count.
  expect(after).toMatchObject({ status: 'ok', disabled: false, disabledReason: null, sent: 0, bounced: 0 });
  expect(after.suspensions[0]).toMatchObject({ liftedBy: 'ops', liftedAt: expect.any(String) });
  // A late bounce of mail sent before the reinstatement is not held against the new slate.
  await s.notify('Bounce', sent[3].ses, { bounce: { bounceType: 'Permanent' } });
  const fresh = await s.send('fresh@example.org');
  await s.notify('Bounce', (fresh as any).ses, { bounce: { bounceType: 'Permanent' } });
  expect(await s.security()).toMatchObject({ status: 'ok', sent: 1, bounced: 1, disabled: false }); // one email is below the minimum
  // Reinstating a project with no open suspension changes nothing.
  expect(
    execFileSync(process.execPath, [path.resolve('dist/src/cli/index.js'), 'reinstate-project', '--project', s.acct.project.id], {
      env: { ...process.env, DATABASE_URL: svc.databaseUrl },
      encoding: 'utf8',
    }),
  ).toContain('0 suspension(s) lifted');
});

test('a project reinstated by a review stored to the microsecond is suspended again by a new breach', async () => {
  const s = await sender('Again');
  const sent: any[] = [];
  for (let i = 0; i < 4; i++) sent.push(await s.send(`a${i}@example.org`));
  for (const m of sent.slice(0, 2)) await s.notify('Bounce', m.ses, { bounce: { bounceType: 'Permanent' } });
  expect(await s.security()).toMatchObject({ status: 'suspended' });
  execFileSync(process.execPath, [path.resolve('dist/src/cli/index.js'), 'reinstate-project', '--project', s.acct.project.id, '--by', 'ops'], {
    env: { ...process.env, DATABASE_URL: svc.databaseUrl },
    encoding: 'utf8',
  });
  // As an older version (or an operator's SQL) wrote it: PostgreSQL's now(), which a JavaScript date cannot hold exactly.
  await dbQuery(svc.databaseUrl, `UPDATE projects SET security_reviewed_at = date_trunc('milliseconds', now()) + interval '500 microseconds' WHERE id = $1`, [
    s.acct.project.id,
  ]);
  await until(async () => ((await svc.api.get('/contacts', { key: s.acct.project.secretKey })).status === 200 ? true : undefined));
  const fresh: any[] = [];
  for (let i = 0; i < 4; i++) fresh.push(await s.send(`f${i}@example.org`));
  for (const m of fresh.slice(0, 2)) await s.notify('Bounce', m.ses, { bounce: { bounceType: 'Permanent' } });
  const state = await s.security();
  expect(state).toMatchObject({ status: 'suspended', disabled: true, sent: 4, bounced: 2 });
  expect(state.suspensions).toHaveLength(2);
});

test('complaints: above 10% of mail sent suspends, and the complaining contact is unsubscribed', async () => {
  const s = await sender('Complained');
  const sent: any[] = [];
  for (let i = 0; i < 4; i++) sent.push(await s.send(`c${i}@example.org`));
  await s.notify('Complaint', sent[0].ses);
  const state = await s.security();
  expect(state).toMatchObject({ status: 'suspended', complained: 1, complaintRate: 0.25 });
  expect(state.suspensions[0]).toMatchObject({ metric: 'complaint', threshold: 0.1 });
  const [contact] = await dbQuery(svc.databaseUrl, `SELECT subscribed FROM contacts WHERE email = 'c0@example.org' AND project_id = $1`, [s.acct.project.id]);
  expect(contact.subscribed).toBe(false);
});

test('only members read a project’s security state', async () => {
  const s = await sender('Private');
  const stranger = await createAccount(svc.api, 'Stranger');
  expect((await svc.api.get(`/projects/${s.acct.project.id}/security`, { cookie: stranger.cookie })).status).toBe(404);
  expect((await svc.api.get(`/projects/${s.acct.project.id}/security`)).status).toBe(401);
  expect((await svc.api.get(`/projects/not-a-uuid/security`, { cookie: s.acct.cookie })).status).toBe(422);
});
