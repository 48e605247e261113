import crypto from 'node:crypto';

/** An Amazon SNS message as posted to an HTTP(S) subscription. */
export interface SnsMessage {
  Type: 'Notification' | 'SubscriptionConfirmation' | 'UnsubscribeConfirmation';
  MessageId: string;
  TopicArn: string;
  Message: string;
  Timestamp: string;
  SignatureVersion: '1' | '2';
  Signature: string;
  SigningCertURL: string;
  Subject?: string;
  SubscribeURL?: string;
  Token?: string;
}

const NOTIFICATION_FIELDS = ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'] as const;
const CONFIRMATION_FIELDS = ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'] as const;

/** The canonical text SNS signs: `Name\nvalue\n` for each present field, in this order. */
export function stringToSign(m: SnsMessage): string {
  const fields = m.Type === 'Notification' ? NOTIFICATION_FIELDS : CONFIRMATION_FIELDS;
  return fields
    .filter((f) => m[f] !== undefined && m[f] !== null)
    .map((f) => `${f}\n${m[f]}\n`)
    .join('');
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Whether a URL may be fetched for SNS: its host matches one of the allowed patterns (`*` stands for
 * one label, as in `sns.*.amazonaws.com`) and it is https — plain http only on loopback, for tests.
 */
export function trustedSnsUrl(raw: string, hostPatterns: string[]): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  const host = url.port ? `${url.hostname}:${url.port}` : url.hostname;
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && LOOPBACK.has(url.hostname))) return false;
  return hostPatterns.some((p) => {
    const re = new RegExp(
      `^${p
        .split('*')
        .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('[a-z0-9-]+')}$`,
      'i',
    );
    return re.test(host) || re.test(url.hostname);
  });
}

/** Verifies SNS signatures against the signing certificate, fetched once per URL from a trusted host. */
export class SnsVerifier {
  private readonly certs = new Map<string, Promise<string>>();

  constructor(
    private readonly hostPatterns: string[],
    private readonly fetchText: (url: string) => Promise<string> = async (url) => {
      const res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(5000) });
      if (!res.ok) throw new Error(`certificate fetch answered ${res.status}`);
      return res.text();
    },
  ) {}

  trusts(url: string): boolean {
    return trustedSnsUrl(url, this.hostPatterns);
  }

  async verify(m: SnsMessage): Promise<boolean> {
    if (!m.SigningCertURL || !m.Signature || !this.trusts(m.SigningCertURL)) return false;
    if (m.SignatureVersion !== '1' && m.SignatureVersion !== '2') return false;
    let cert = this.certs.get(m.SigningCertURL);
    if (!cert) {
      cert = this.fetchText(m.SigningCertURL);
      this.certs.set(m.SigningCertURL, cert);
      cert.catch(() => this.certs.delete(m.SigningCertURL));
    }
    try {
      const verifier = crypto.createVerify(m.SignatureVersion === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
      verifier.update(stringToSign(m), 'utf8');
      return verifier.verify(await cert, m.Signature, 'base64');
    } catch {
      return false;
    }
  }
}
