import { type Orm, sql } from '../../src/db/orm';
import type { ZoneDnsServer } from '../../src/dns/zone-server';
import { createProject, signup } from '../../src/modules/accounts/accounts.service';
import { generateDkimKeyPair } from '../../src/modules/domains/domain-records';
import type { Api } from './service';

/**
 * For tests of the services without HTTP: a new account's project whose sender `domain` is verified,
 * with a DKIM key of its own. Answers the project's id.
 */
export async function projectSendingFrom(orm: Orm, domain: string): Promise<string> {
  const em = orm.em.fork();
  const user = await signup(em, `owner@${domain}`, 'a test password');
  const projectId = (await createProject(em, user.id, domain)).id;
  const keys = generateDkimKeyPair();
  await sql(
    em,
    `INSERT INTO domains (id, project_id, domain, status, verification_token, dkim_selector, dkim_private_key, dkim_public_key, spf_value)
     VALUES (gen_random_uuid(), ?, ?, 'verified', '-', 'pb', ?, ?, '-')`,
    [projectId, domain, keys.privateKey, keys.publicKey],
  );
  return projectId;
}

/** Adds a sender domain, publishes its records in the test DNS zone and verifies it: how a user gets a sender. */
export async function verifiedDomain(api: Api, dns: ZoneDnsServer, secretKey: string, domain: string) {
  const created = await api.post('/domains', { domain }, { key: secretKey });
  if (created.status !== 201) throw new Error(`domain failed: ${created.status} ${JSON.stringify(created.body)}`);
  // The required records only (ownership, DKIM, SPF; DMARC beside them): the return path stays unpublished,
  // so mail keeps the From address as its envelope sender unless a test publishes it (publishReturnPath).
  for (const r of created.body.records) if (r.type === 'TXT' && !String(r.purpose).startsWith('return-path')) dns.add(r.name, 'TXT', r.value);
  const checked = await api.get(`/domains/${created.body.id}/verify`, { key: secretKey });
  if (checked.body.status !== 'verified') throw new Error(`domain not verified: ${JSON.stringify(checked.body)}`);
  return checked.body as { id: string; domain: string; dkimSelector: string; records: Array<{ name: string; value: string }> };
}

/** Publishes a verified domain's return-path records (MX and SPF) and checks them: its mail then carries per-message return paths. */
export async function publishReturnPath(api: Api, dns: ZoneDnsServer, secretKey: string, domainId: string): Promise<{ host: string }> {
  const domain = (await api.get(`/domains/${domainId}`, { key: secretKey })).body;
  for (const r of domain.records) {
    if (r.purpose === 'return-path') dns.add(r.name, 'MX', { exchange: r.value, priority: r.priority });
    if (r.purpose === 'return-path-spf') dns.add(r.name, 'TXT', r.value);
  }
  const checked = await api.get(`/domains/${domainId}/verify`, { key: secretKey });
  if (!checked.body.returnPath?.verified) throw new Error(`return path not verified: ${JSON.stringify(checked.body)}`);
  return checked.body.returnPath;
}
