import crypto from 'node:crypto';
import { AwsClient } from 'aws4fetch';

export interface S3Settings {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Temporary credentials (an IAM role, STS): sent as X-Amz-Security-Token and signed. */
  sessionToken?: string;
}

const sha256 = (data: string | Buffer) => crypto.createHash('sha256').update(data).digest('hex');

/**
 * An S3-compatible bucket, addressed path-style (`<endpoint>/<bucket>/<key>`), as MinIO, R2 and Ceph
 * take it. Requests are signed (SigV4) by `aws4fetch`, with the payload's SHA-256 signed too.
 */
export class S3Bucket {
  private readonly client: AwsClient;

  constructor(private readonly s: S3Settings) {
    this.client = new AwsClient({
      accessKeyId: s.accessKeyId,
      secretAccessKey: s.secretAccessKey,
      sessionToken: s.sessionToken,
      region: s.region,
      service: 's3',
      // Retries are the caller's: an upload answers its client either way.
      retries: 0,
    });
  }

  private url(key: string): string {
    return `${this.s.endpoint.replace(/\/+$/, '')}/${this.s.bucket}/${key}`;
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    const res = await this.client.fetch(this.url(key), {
      method: 'PUT',
      headers: { 'content-type': contentType, 'x-amz-content-sha256': sha256(body) },
      body,
      signal: AbortSignal.timeout(30_000),
    });
    if (!res.ok) throw new Error(`S3 PUT ${key} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  }

  /** The object's response, or undefined when the bucket has no such key. */
  async get(key: string): Promise<Response | undefined> {
    // The timeout covers the bucket's answer, not the time a slow mail client takes to download it.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new Error('S3 did not answer within 30 s')), 30_000);
    const res = await this.client
      .fetch(this.url(key), { headers: { 'x-amz-content-sha256': sha256('') }, signal: abort.signal })
      .finally(() => clearTimeout(timer));
    if (res.status === 404) return undefined;
    if (!res.ok) throw new Error(`S3 GET ${key} answered ${res.status}`);
    return res;
  }
}
