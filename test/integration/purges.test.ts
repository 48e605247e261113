/** The maintenance purges of rate-limit windows, the MX's report log and received mail: rows past their time go, the others stay. */
import crypto from 'node:crypto';
import pino from 'pino';
import { createOrm, type Orm } from '../../src/db/orm';
import { purgeRateLimitKeyWindows, purgeRateLimitWindows } from '../../src/db/rate-limiter';
import { purgeInboundReports } from '../../src/inbound/inbound-reports';
import { entities } from '../../src/modules/entities';
import { purgeInboundEmails } from '../../src/modules/inbound-emails';
import { createTestDatabase, dbQuery } from '../setup/db';

let url: string;
let orm: Orm;
let projectId: string;
beforeAll(async () => {
  url = await createTestDatabase();
  orm = await createOrm(url, { entities, poolMax: 2, log: pino({ level: 'silent' }) });
  projectId = crypto.randomUUID();
  await dbQuery(url, `INSERT INTO projects (id, name, public_key, secret_key) VALUES ($1, 'p', $2, $3)`, [projectId, `pk_${projectId}`, `sk_${projectId}`]);
});
afterAll(async () => {
  await orm.close();
});

test('rate-limit windows that ended more than two minutes ago are purged; the current one stays', async () => {
  await dbQuery(
    url,
    `INSERT INTO rate_limit_windows (project_id, window_start, count) VALUES ($1, now() - interval '10 minutes', 5), ($1, date_trunc('minute', now()), 7)`,
    [projectId],
  );
  expect(await purgeRateLimitWindows(orm.em.fork())).toBe(1);
  expect(await dbQuery(url, `SELECT count FROM rate_limit_windows`)).toEqual([{ count: 7 }]);
});

test('keyed rate-limit windows (the subscribe form) are purged a day after they started; younger ones stay', async () => {
  await dbQuery(
    url,
    `INSERT INTO rate_limit_key_windows (project_id, key, window_start, count)
     VALUES ($1, 'ip:a', now() - interval '25 hours', 5), ($1, 'ip:a', now() - interval '23 hours', 2)`,
    [projectId],
  );
  expect(await purgeRateLimitKeyWindows(orm.em.fork())).toBe(1);
  expect(await dbQuery(url, `SELECT count FROM rate_limit_key_windows`)).toEqual([{ count: 2 }]);
});

test('inbound reports older than the log keeps are purged; recent ones stay', async () => {
  await dbQuery(
    url,
    `INSERT INTO inbound_reports (id, report_key, kind, envelope_to, received_at)
     VALUES ($1, 'old', 'bounce', 'b@x', now() - interval '31 days'), ($2, 'new', 'bounce', 'b@x', now() - interval '29 days')`,
    [crypto.randomUUID(), crypto.randomUUID()],
  );
  expect(await purgeInboundReports(orm.em.fork())).toBe(1);
  expect(await dbQuery(url, `SELECT report_key FROM inbound_reports`)).toEqual([{ report_key: 'new' }]);
});

test('received mail older than INBOUND_EMAIL_RETENTION_DAYS is purged; younger mail stays', async () => {
  const contactId = crypto.randomUUID();
  await dbQuery(url, `INSERT INTO contacts (id, project_id, email, subscribed) VALUES ($1, $2, 'ann@example.org', false)`, [contactId, projectId]);
  await dbQuery(
    url,
    `INSERT INTO inbound_emails (id, project_id, message_key, from_address, to_addresses, cc_addresses, subject, headers, attachments,
       contact_id, envelope_to, size_bytes, raw, received_at)
     SELECT gen_random_uuid(), $1, k, 'ann@example.org', '[]', '[]', k, '[]', '[]', $2, 'x@inbound.acme.test', 1, 'x', now() - (d || ' days')::interval
     FROM (VALUES ('old', 8), ('new', 6)) AS v(k, d)`,
    [projectId, contactId],
  );
  expect(await purgeInboundEmails(orm.em.fork(), 7)).toBe(1);
  expect(await dbQuery(url, `SELECT subject FROM inbound_emails`)).toEqual([{ subject: 'new' }]);
});
