import type { ZoneDnsServer } from '../../src/dns/zone-server';
import type { Api } from './service';

/** Adds a sender domain, publishes its records in the test DNS zone and verifies it: how a user gets a sender. */
export async function verifiedDomain(api: Api, dns: ZoneDnsServer, secretKey: string, domain: string) {
  const created = await api.post('/domains', { domain }, { key: secretKey });
  if (created.status !== 201) throw new Error(`domain failed: ${created.status} ${JSON.stringify(created.body)}`);
  for (const r of created.body.records) dns.add(r.name, 'TXT', r.value);
  const checked = await api.get(`/domains/${created.body.id}/verify`, { key: secretKey });
  if (checked.body.status !== 'verified') throw new Error(`domain not verified: ${JSON.stringify(checked.body)}`);
  return checked.body as { id: string; domain: string; dkimSelector: string; records: Array<{ name: string; value: string }> };
}
