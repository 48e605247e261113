import crypto from 'node:crypto';
import { promisify } from 'node:util';

/** With a callback, crypto.sign runs on libuv's threadpool: the RSA signature, most of a message's cost, leaves the event loop. */
const sign = promisify(crypto.sign);

/** A sender domain's signing key, parsed once (parsing a PEM costs three times the signature). */
export interface DkimKey {
  domainName: string;
  keySelector: string;
  privateKey: crypto.KeyObject;
}

/** The headers signed when present, lower case: what a receiver shows or acts on. */
const SIGNED = [
  'from',
  'sender',
  'reply-to',
  'subject',
  'date',
  'message-id',
  'to',
  'cc',
  'mime-version',
  'content-type',
  'list-unsubscribe',
  'list-unsubscribe-post',
];

/** RFC 6376 §3.4.4 relaxed body canonicalization of a CRLF body. */
export function relaxedBody(body: string): string {
  let out = body.replace(/[ \t]+\r\n/g, '\r\n').replace(/[ \t]+/g, ' ');
  if (out.endsWith(' ')) out = out.replace(/ +$/, '');
  out = out.replace(/(\r\n)+$/, '');
  return out.length ? out + '\r\n' : '';
}

/** RFC 6376 §3.4.2 relaxed header canonicalization of one `Name: value` header (folded or not). */
export function relaxedHeader(name: string, value: string): string {
  return `${name.trim().toLowerCase()}:${value
    .replace(/\r\n/g, '')
    .replace(/[ \t]+/g, ' ')
    .trim()}\r\n`;
}

/**
 * The `DKIM-Signature` header line (with its CRLF) for a message given as its header lines
 * (`[name, value]`, value as it is written, folds included) and its CRLF body: rsa-sha256,
 * relaxed/relaxed, signing the listed headers that are present.
 */
export async function dkimSignature(headers: Array<[string, string]>, body: string, key: DkimKey, now = Date.now()): Promise<string> {
  const bodyHash = crypto.createHash('sha256').update(relaxedBody(body)).digest('base64');
  // The last instance of a header is the one a verifier pairs with the first name in h=.
  const byName = new Map<string, [string, string]>();
  for (const h of headers) byName.set(h[0].toLowerCase(), h);
  const signed = SIGNED.filter((n) => byName.has(n));
  const tags =
    `v=1; a=rsa-sha256; c=relaxed/relaxed; d=${key.domainName}; q=dns/txt; s=${key.keySelector};\r\n` +
    ` t=${Math.floor(now / 1000)}; h=${signed.join(':')};\r\n bh=${bodyHash}; b=`;
  let data = '';
  for (const n of signed) data += relaxedHeader(...byName.get(n)!);
  data += relaxedHeader('DKIM-Signature', tags).slice(0, -2);
  const b = (await sign('sha256', Buffer.from(data), key.privateKey)).toString('base64');
  return `DKIM-Signature: ${tags}${b.replace(/.{72}/g, '$&\r\n ').trimEnd()}\r\n`;
}
