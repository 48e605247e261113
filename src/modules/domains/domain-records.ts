import crypto from 'node:crypto';
import type { Resolver } from '../../dns/resolver';

export type RecordPurpose = 'ownership' | 'dkim' | 'spf' | 'dmarc' | 'return-path' | 'return-path-spf' | 'inbound';
export type RecordStatus = 'verified' | 'pending' | 'error';

/** A DNS record the owner publishes. This shape is a public contract: keep it (an MX record adds its priority). */
export interface DnsRecord {
  type: 'TXT' | 'MX';
  name: string;
  value: string;
  required: boolean;
  purpose: RecordPurpose;
  priority?: number;
}

/**
 * The return path's records: `<prefix>.<domain>` MX to the service's inbound MX, where bounces and
 * complaints come back, and an SPF record there, since receivers check SPF on the envelope sender's
 * domain. Never required: until both are found, mail keeps the From address as its envelope sender.
 */
export interface ReturnPathDns {
  prefix: string;
  mxHost: string;
  spfValue: string;
}

const MX_PRIORITY = 10;

export interface CheckedRecord extends DnsRecord {
  status: RecordStatus;
  /** What DNS answered at that name, to help the owner see what is wrong. */
  found: string[];
  error?: string;
}

/** What the last check found of each record, by purpose. */
export type RecordStatuses = Record<string, { status: RecordStatus; found: string[]; error?: string }>;

export interface DomainKeys {
  domain: string;
  verificationToken: string;
  dkimSelector: string;
  dkimPublicKey: string;
  spfValue: string;
}

export function generateDkimKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    // The p= tag carries the DER SubjectPublicKeyInfo in base64 (RFC 6376 §3.6.1).
    publicKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
  };
}

export const newDkimSelector = () => `postbox-${crypto.randomBytes(3).toString('hex')}`;
export const newVerificationToken = () => crypto.randomBytes(20).toString('hex');

export function domainRecords(d: DomainKeys, returnPath?: ReturnPathDns): DnsRecord[] {
  const returnPathRecords: DnsRecord[] = returnPath
    ? [
        { type: 'MX', name: `${returnPath.prefix}.${d.domain}`, value: returnPath.mxHost, priority: MX_PRIORITY, required: false, purpose: 'return-path' },
        { type: 'TXT', name: `${returnPath.prefix}.${d.domain}`, value: returnPath.spfValue, required: false, purpose: 'return-path-spf' },
        // Where mail to any address at inbound.<domain> is received (docs/smtp.md). Never required: a domain that
        // only sends need not receive. The MX takes that mail once the domain is verified, whatever DNS says.
        { type: 'MX', name: `inbound.${d.domain}`, value: returnPath.mxHost, priority: MX_PRIORITY, required: false, purpose: 'inbound' },
      ]
    : [];
  return [
    {
      type: 'TXT',
      name: `_postbox-verification.${d.domain}`,
      value: `postbox-verification=${d.verificationToken}`,
      required: true,
      purpose: 'ownership',
    },
    {
      type: 'TXT',
      name: `${d.dkimSelector}._domainkey.${d.domain}`,
      value: `v=DKIM1; k=rsa; p=${d.dkimPublicKey}`,
      required: true,
      purpose: 'dkim',
    },
    { type: 'TXT', name: d.domain, value: d.spfValue, required: true, purpose: 'spf' },
    { type: 'TXT', name: `_dmarc.${d.domain}`, value: 'v=DMARC1; p=none;', required: false, purpose: 'dmarc' },
    ...returnPathRecords,
  ];
}

/** Whether a domain's last check found both return-path records: only then does its mail carry per-message return paths. */
export function returnPathVerified(recordStatus: Record<string, { status: RecordStatus }> | null | undefined): boolean {
  return recordStatus?.['return-path']?.status === 'verified' && recordStatus?.['return-path-spf']?.status === 'verified';
}

function tags(record: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of record.split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out.set(part.slice(0, i).trim().toLowerCase(), part.slice(i + 1).replace(/\s+/g, ''));
  }
  return out;
}

/** The mechanisms of our SPF value other than the version and the `all` qualifier. */
const spfMechanisms = (spf: string) =>
  spf
    .toLowerCase()
    .split(/\s+/)
    .filter((m) => m && m !== 'v=spf1' && !/^[-~+?]?all$/.test(m));

/**
 * Whether the published TXT values satisfy one record. Ownership must match exactly; DKIM must carry
 * our public key; an SPF record may hold other mechanisms too, but must include ours; DMARC must exist.
 */
export function satisfies(record: DnsRecord, published: string[]): boolean {
  switch (record.purpose) {
    case 'ownership':
      return published.some((v) => v.trim() === record.value);
    case 'dkim': {
      const want = tags(record.value).get('p');
      return published.some((v) => {
        const t = tags(v);
        return t.get('p') === want && (t.get('v') ?? 'DKIM1') === 'DKIM1';
      });
    }
    case 'spf':
    case 'return-path-spf': {
      const spf = published.find((v) => /^v=spf1(\s|$)/i.test(v.trim()));
      if (!spf) return false;
      const have = new Set(spf.toLowerCase().split(/\s+/));
      return spfMechanisms(record.value).every((m) => have.has(m));
    }
    case 'dmarc':
      return published.some((v) => /^v=DMARC1\s*(;|$)/i.test(v.trim()));
    case 'return-path':
    case 'inbound':
      // `found` for an MX is "<priority> <exchange>"; any priority will do.
      return published.some((v) => v.split(' ').pop()?.replace(/\.$/, '').toLowerCase() === record.value);
  }
}

/** What DNS answers at a record's name for its type, as text (an MX as "<priority> <exchange>"). */
async function published(resolver: Resolver, r: DnsRecord): Promise<string[]> {
  if (r.type === 'MX') return (await resolver.lookup(r.name, 'MX')).answers.map((mx) => `${mx.priority} ${mx.exchange}`);
  return (await resolver.lookup(r.name, 'TXT')).answers;
}

/** Looks every record up through the service's resolver. A DNS failure is `error`, never `pending`. */
export async function checkRecords(resolver: Resolver, records: DnsRecord[]): Promise<CheckedRecord[]> {
  const byName = new Map<string, Promise<string[]>>();
  const keyOf = (r: DnsRecord) => `${r.type} ${r.name}`;
  for (const r of records) if (!byName.has(keyOf(r))) byName.set(keyOf(r), published(resolver, r));
  return Promise.all(
    records.map(async (r) => {
      try {
        const answers = await byName.get(keyOf(r))!;
        return { ...r, status: satisfies(r, answers) ? 'verified' : 'pending', found: answers } as CheckedRecord;
      } catch (err) {
        return { ...r, status: 'error', found: [], error: (err as Error).message } as CheckedRecord;
      }
    }),
  );
}
