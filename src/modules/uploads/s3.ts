import crypto from 'node:crypto';

export interface S3Settings {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

const sha256 = (data: string | Buffer) => crypto.createHash('sha256').update(data).digest('hex');
const hmac = (key: crypto.BinaryLike, data: string) => crypto.createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding of each path segment, as SigV4's canonical URI wants it. */
const encodePath = (p: string) =>
  p
    .split('/')
    .map((s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`))
    .join('/');

/**
 * AWS Signature Version 4 for one S3 request: answers the headers to send (`x-amz-date`,
 * `x-amz-content-sha256`, `authorization`) given the request's own headers, which are all signed.
 */
export function signS3Request(
  req: { method: string; url: URL; headers: Record<string, string>; payloadHash: string },
  creds: { accessKeyId: string; secretAccessKey: string; region: string },
  now = new Date(),
): Record<string, string> {
  const amzDate = now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    ...Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), v.trim()])),
    host: req.url.host,
    'x-amz-content-sha256': req.payloadHash,
    'x-amz-date': amzDate,
  };
  const names = Object.keys(headers).sort();
  const query = [...req.url.searchParams]
    .map(([k, v]) => [encodeURIComponent(k), encodeURIComponent(v)])
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : 1) : a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const canonical = [
    req.method,
    encodePath(decodeURIComponent(req.url.pathname)),
    query,
    names.map((n) => `${n}:${headers[n]}\n`).join(''),
    names.join(';'),
    req.payloadHash,
  ].join('\n');
  const scope = `${day}/${creds.region}/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(canonical)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${creds.secretAccessKey}`, day), creds.region), 's3'), 'aws4_request');
  const signature = crypto.createHmac('sha256', key).update(toSign).digest('hex');
  return {
    ...headers,
    authorization: `AWS4-HMAC-SHA256 Credential=${creds.accessKeyId}/${scope},SignedHeaders=${names.join(';')},Signature=${signature}`,
  };
}

/** An S3-compatible bucket, addressed path-style (`<endpoint>/<bucket>/<key>`), as MinIO, R2 and Ceph take it. */
export class S3Bucket {
  constructor(private readonly s: S3Settings) {}

  private url(key: string): URL {
    return new URL(`${this.s.endpoint.replace(/\/+$/, '')}/${this.s.bucket}/${key}`);
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    const url = this.url(key);
    const headers = signS3Request({ method: 'PUT', url, headers: { 'content-type': contentType }, payloadHash: sha256(body) }, this.s);
    delete headers.host;
    const res = await fetch(url, { method: 'PUT', headers, body, signal: AbortSignal.timeout(30_000) });
    if (!res.ok) throw new Error(`S3 PUT ${key} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  }

  /** The object's response, or undefined when the bucket has no such key. */
  async get(key: string): Promise<Response | undefined> {
    const url = this.url(key);
    const headers = signS3Request({ method: 'GET', url, headers: {}, payloadHash: sha256('') }, this.s);
    delete headers.host;
    // The timeout covers the bucket's answer, not the time a slow mail client takes to download it.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new Error('S3 did not answer within 30 s')), 30_000);
    const res = await fetch(url, { headers, signal: abort.signal }).finally(() => clearTimeout(timer));
    if (res.status === 404) return undefined;
    if (!res.ok) throw new Error(`S3 GET ${key} answered ${res.status}`);
    return res;
  }
}
