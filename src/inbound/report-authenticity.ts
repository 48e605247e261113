import ipaddr from 'ipaddr.js';
import { authenticate, type DNSResolver } from 'mailauth';
import type { Logger } from 'pino';
import type { RecordType, Resolver } from '../dns/resolver';

/** Who handed a report to the MX. */
export interface ReportClient {
  address: string;
  helo: string;
}

/** How a complaint was authenticated: a DMARC pass of its author's domain, or the recipient's own MX. */
export type ComplaintAuthentication = { method: 'dmarc'; domain: string } | { method: 'receiving-mx'; domain: string };

const LOOKUP_TYPES = new Set<string>(['A', 'AAAA', 'MX', 'TXT', 'NS', 'CNAME']);

const dnsError = (code: 'ENOTFOUND' | 'ENODATA', name: string) => Object.assign(new Error(`${code} ${name}`), { code });

/**
 * mailauth's resolver (node's `dns.resolve` shape) over the service's one resolver, so its lookups go
 * where every other lookup goes (DNS_SERVERS, the test's own server). Types the resolver does not ask
 * for (PTR for SPF's deprecated `ptr`) are answered as absent.
 */
function mailauthResolver(resolver: Resolver): DNSResolver {
  return async (name, type) => {
    if (!LOOKUP_TYPES.has(type)) throw dnsError('ENODATA', name);
    const r = await resolver.lookup(name, type as Exclude<RecordType, 'MX'>);
    if (r.status === 'nxdomain') throw dnsError('ENOTFOUND', name);
    if (r.status === 'nodata') throw dnsError('ENODATA', name);
    // TXT answers are arrays of strings in node's shape; the resolver joined each record's strings already.
    // MX answers keep their objects, as node's do; the type says strings only.
    return (type === 'TXT' ? r.answers.map((a) => [a]) : r.answers) as string[];
  };
}

/** At most this many MX hosts of a recipient's domain are looked up for their addresses. */
const MAX_MX_HOSTS = 10;

/**
 * Decides whether a complaint comes from a party that may speak for the recipient's mailbox provider:
 * anyone can forge an ARF report, so only an authenticated one counts toward a project's suspension.
 */
export class ReportAuthenticity {
  private readonly lookup: DNSResolver;

  constructor(
    private readonly resolver: Resolver,
    /** Our MX's name, for the Authentication-Results mailauth composes (never stored). */
    private readonly mta: string,
    private readonly log: Logger,
  ) {
    this.lookup = mailauthResolver(resolver);
  }

  /**
   * The report's author domain when the report passes DMARC for it (an aligned DKIM signature or SPF
   * pass): an authenticated feedback loop. A DNS failure is no pass.
   */
  async dmarcDomain(raw: Buffer, client: ReportClient, envelopeFrom: string | null): Promise<string | undefined> {
    try {
      const result = await authenticate(raw, {
        ip: client.address,
        helo: client.helo,
        sender: envelopeFrom ?? '',
        mta: this.mta,
        resolver: this.lookup,
        trustReceived: false,
        disableArc: true,
        disableBimi: true,
      });
      // `domain`: the author domain's organizational domain (the DNS tree walk's).
      return result.dmarc && result.dmarc.status?.result === 'pass' ? result.dmarc.domain?.toLowerCase() : undefined;
    } catch (err) {
      this.log.warn({ err }, 'could not authenticate a complaint report');
      return undefined;
    }
  }

  /** Whether `address` is an address of one of the MX hosts of `domain` (the recipient's own servers). */
  async fromReceivingServers(domain: string, address: string): Promise<boolean> {
    let client: ipaddr.IPv4 | ipaddr.IPv6;
    try {
      client = ipaddr.process(address);
    } catch {
      return false;
    }
    try {
      const mx = await this.resolver.lookup(domain, 'MX');
      for (const { exchange } of mx.answers.slice(0, MAX_MX_HOSTS)) {
        const type = client.kind() === 'ipv4' ? 'A' : 'AAAA';
        const { answers } = await this.resolver.lookup(exchange, type);
        if (answers.some((a) => ipaddr.isValid(a) && ipaddr.process(a).toString() === client.toString())) return true;
      }
    } catch (err) {
      this.log.warn({ err, domain }, 'could not look up the MX hosts of a complaint’s recipient domain');
    }
    return false;
  }
}
