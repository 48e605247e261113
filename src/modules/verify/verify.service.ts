import { DnsError, type LookupStatus, type Resolver } from '../../dns/resolver';
import { isAliasDomain, isDisposableDomain, isListedMailProvider } from './domain-lists';
import { suggestDomain } from './typo';

/** The spec's "Email verification result". */
export interface VerificationResult {
  email: string;
  valid: boolean;
  isDisposable: boolean;
  isAlias: boolean;
  isTypo: boolean;
  isPlusAddressed: boolean;
  isPersonalEmail: boolean;
  domainExists: boolean;
  hasWebsite: boolean;
  hasMxRecords: boolean;
  suggestedEmail?: string;
  reasons: string[];
}

/** What DNS said for one record type of the domain; `failed` when no server answered. */
export type DnsFinding = LookupStatus | 'failed';

export interface DomainDns {
  NS: DnsFinding;
  MX: DnsFinding;
  A: DnsFinding;
  AAAA: DnsFinding;
  /** MX answered with only the RFC 7505 null MX (`MX 0 .`): the domain accepts no mail. */
  nullMx: boolean;
  /** Why lookups failed, when some did. */
  failure?: string;
}

export type DomainLookup = (domain: string) => Promise<DomainDns>;

const RECORD_TYPES = ['NS', 'MX', 'A', 'AAAA'] as const;

/** The four lookups verification needs, in parallel, through the service's one resolver. */
export async function lookupDomain(resolver: Resolver, domain: string): Promise<DomainDns> {
  const settle = async <T>(lookup: Promise<{ status: LookupStatus; answers: T[] }>) => {
    try {
      return await lookup;
    } catch (err) {
      if (err instanceof DnsError) return err;
      throw err;
    }
  };
  const [ns, mx, a, aaaa] = await Promise.all([
    settle(resolver.lookup(domain, 'NS')),
    settle(resolver.lookup(domain, 'MX')),
    settle(resolver.lookup(domain, 'A')),
    settle(resolver.lookup(domain, 'AAAA')),
  ]);
  const finding = (r: { status: LookupStatus } | DnsError): DnsFinding => (r instanceof DnsError ? 'failed' : r.status);
  const failed = [ns, mx, a, aaaa].find((r): r is DnsError => r instanceof DnsError);
  return {
    NS: finding(ns),
    MX: finding(mx),
    A: finding(a),
    AAAA: finding(aaaa),
    // The resolver strips the root's trailing dot, so the null MX's "." arrives as "".
    nullMx: !(mx instanceof DnsError) && mx.status === 'found' && mx.answers.every((r) => r.exchange === ''),
    failure: failed?.message,
  };
}

/**
 * Remembers each domain's DNS findings briefly (and shares lookups already under way), so verifying
 * a list of addresses at one provider asks DNS once. Findings with a failed lookup are not kept.
 */
export class DomainDnsCache {
  private readonly entries = new Map<string, { at: number; dns: Promise<DomainDns> }>();

  constructor(
    private readonly lookup: DomainLookup,
    private readonly ttlMs = 30_000,
    private readonly maxEntries = 10_000,
  ) {}

  get(domain: string): Promise<DomainDns> {
    const hit = this.entries.get(domain);
    if (hit && Date.now() - hit.at < this.ttlMs) return hit.dns;
    this.entries.delete(domain);
    const entry = { at: Date.now(), dns: this.lookup(domain) };
    const forget = () => {
      if (this.entries.get(domain) === entry) this.entries.delete(domain);
    };
    entry.dns.then((dns) => dns.failure && forget(), forget);
    this.entries.set(domain, entry);
    // Map order is insertion order: the first key is the oldest entry.
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return entry.dns;
  }
}

export function splitAddress(email: string): { local: string; domain: string } {
  const at = email.lastIndexOf('@');
  return { local: email.slice(0, at), domain: email.slice(at + 1) };
}

/** Sub-addressing (`ada+news@…`): the spec's rule is simply a `+` in the local part. */
export const isPlusAddressed = (local: string) => local.includes('+');

/**
 * The verdict from an address and its domain's DNS findings. `valid` means: the domain exists,
 * publishes MX records that name a mail host, and is not disposable. A typo suspicion, an alias,
 * a personal provider or plus-addressing are reported but do not make an address invalid.
 */
export function assess(email: string, dns: DomainDns): VerificationResult {
  const { local, domain } = splitAddress(email);
  const found = (t: (typeof RECORD_TYPES)[number]) => dns[t] === 'found';

  // NS is the spec's test; a host name inside a zone (mail.example.com) has none of its own.
  const domainExists = RECORD_TYPES.some(found);
  const hasMxRecords = found('MX') && !dns.nullMx;
  const hasWebsite = found('A') || found('AAAA');
  const nxdomain = !domainExists && RECORD_TYPES.some((t) => dns[t] === 'nxdomain');

  const isDisposable = isDisposableDomain(domain);
  const isAlias = isAliasDomain(domain);
  const suggested = suggestDomain(domain);
  const isTypo = suggested !== undefined;
  // Provider lists also carry disposable and typo domains (gmial.com); those are not mailboxes.
  const isPersonalEmail = isListedMailProvider(domain) && !isDisposable && !isAlias && !isTypo;

  const reasons: string[] = [];
  const failedTypes = RECORD_TYPES.filter((t) => dns[t] === 'failed');
  if (nxdomain) {
    reasons.push(`Domain ${domain} does not exist (DNS answered NXDOMAIN)`);
  } else if (failedTypes.length) {
    // Unknown is not "no": say which fields DNS could not decide.
    const unknown = [
      !domainExists && 'domainExists',
      dns.MX === 'failed' && 'hasMxRecords',
      !hasWebsite && (dns.A === 'failed' || dns.AAAA === 'failed') && 'hasWebsite',
    ].filter((f): f is string => Boolean(f));
    if (unknown.length) {
      reasons.push(
        `DNS lookup failed for ${domain} (${failedTypes.join(', ')}): ${dns.failure ?? 'no answer'}; ` +
          `${unknown.join(', ')} could not be checked and ${unknown.length > 1 ? 'are' : 'is'} reported as false`,
      );
    }
  } else if (!domainExists) {
    reasons.push(`Domain ${domain} has no NS, MX, A or AAAA records`);
  }
  if (domainExists && dns.MX !== 'failed') {
    if (dns.nullMx) reasons.push(`${domain} publishes a null MX record (RFC 7505): it accepts no mail`);
    else if (hasMxRecords) reasons.push(`${domain} has MX records, so it can receive mail`);
    else if (hasWebsite) {
      reasons.push(`${domain} has no MX records; mail would fall back to its A/AAAA address (RFC 5321 §5.1), which is not counted as valid`);
    } else reasons.push(`${domain} has no MX records and no A/AAAA records, so it cannot receive mail`);
  }
  if (isDisposable) reasons.push(`${domain} is listed as a disposable (temporary) email domain`);
  if (isTypo) reasons.push(`Possible typo: did you mean ${local}@${suggested}?`);
  if (isAlias) reasons.push(`${domain} is an email forwarding (alias) service`);
  if (isPersonalEmail) reasons.push(`${domain} is a free personal mailbox provider`);
  if (isPlusAddressed(local)) reasons.push('The local part uses plus addressing (a +tag)');

  return {
    email,
    valid: domainExists && hasMxRecords && !isDisposable,
    isDisposable,
    isAlias,
    isTypo,
    isPlusAddressed: isPlusAddressed(local),
    isPersonalEmail,
    domainExists,
    hasWebsite,
    hasMxRecords,
    ...(isTypo ? { suggestedEmail: `${local}@${suggested}` } : {}),
    reasons,
  };
}

/** Verifies a syntactically valid, normalised address (the schema's output). */
export async function verifyEmail(email: string, lookup: DomainLookup): Promise<VerificationResult> {
  return assess(email, await lookup(splitAddress(email).domain));
}
