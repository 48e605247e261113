import { authenticate } from 'mailauth';
import { Resolver } from '../../src/dns/resolver';
import type { ZoneDnsServer } from '../../src/dns/zone-server';

/**
 * DKIM checked the way a receiving server does (mailauth's verifier): the first signature against
 * the key published in the test DNS server. The status carries `result` and, when not a pass, why.
 */
export async function dkimStatus(raw: Buffer, dns: ZoneDnsServer, sender: string): Promise<{ result: string; comment: string | false }> {
  const resolver = new Resolver([dns.address]);
  const result = await authenticate(raw, {
    trustReceived: false,
    sender,
    ip: '127.0.0.1',
    helo: 'localhost',
    resolver: async (name: string, type: string) => {
      const r = await resolver.lookup(name, type as 'TXT');
      if (r.status === 'nxdomain') throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
      return type === 'TXT' ? r.answers.map((a) => [a]) : r.answers;
    },
  } as never);
  return (result as any).dkim.results[0]?.status;
}
