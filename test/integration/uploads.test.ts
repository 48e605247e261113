import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { loadConfig } from '../../src/config';
import { AwsV4Signer } from 'aws4fetch';
import { type Account, createAccount, startTestService, type TestService } from '../setup/service';

let svc: TestService;
let acct: Account;
beforeAll(async () => {
  svc = await startTestService({ UPLOAD_MAX_MB: '0.01', PUBLIC_URL: 'https://mail.example.test' });
  acct = await createAccount(svc.api);
});
afterAll(() => svc.stop());

// A 1×1 transparent PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');

async function upload(bytes: Buffer | string, filename: string, opts: { field?: string; key?: string; type?: string } = {}) {
  const form = new FormData();
  form.append(opts.field ?? 'image', new Blob([bytes], { type: opts.type ?? 'image/png' }), filename);
  const res = await fetch(`${svc.api.baseUrl}/uploads/image`, {
    method: 'POST',
    body: form,
    headers: { authorization: `Bearer ${opts.key ?? acct.project.secretKey}` },
  });
  return { status: res.status, body: (await res.json()) as any };
}

test('an image is stored and served back, publicly, at a URL under PUBLIC_URL, with the type its bytes say', async () => {
  const res = await upload(PNG, 'photo.jpeg', { type: 'image/jpeg' });
  expect(res.status).toBe(201);
  expect(res.body).toEqual({
    id: expect.any(String),
    url: expect.stringMatching(new RegExp(`^https://mail\\.example\\.test/uploads/${acct.project.id}/[0-9a-f-]{36}\\.png$`)),
    contentType: 'image/png',
    size: PNG.length,
  });
  const served = await fetch(`${svc.api.baseUrl}${new URL(res.body.url).pathname}`);
  expect(served.status).toBe(200);
  expect(served.headers.get('content-type')).toBe('image/png');
  expect(served.headers.get('x-content-type-options')).toBe('nosniff');
  expect(Buffer.from(await served.arrayBuffer()).equals(PNG)).toBe(true);
});

test('SVG and files that only claim to be images are refused with 415; nothing is stored', async () => {
  const svg = await upload('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', 'logo.svg', {
    type: 'image/svg+xml',
  });
  expect(svg.status).toBe(415);
  expect(svg.body.error).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('SVG') });
  const fake = await upload('<html>not an image</html>', 'evil.png');
  expect(fake.status).toBe(415);
  const stored = fs.readdirSync(path.join(svc.dataDir, 'uploads', acct.project.id));
  expect(stored.every((name) => name.endsWith('.png'))).toBe(true);
  expect(stored).toHaveLength(1);
});

test('too large is 413, no file is 422, the public key is 401, and only stored names are served', async () => {
  expect((await upload(Buffer.concat([PNG, Buffer.alloc(20_000)]), 'big.png')).status).toBe(413);
  const missing = await upload(PNG, 'x.png', { field: 'file' });
  expect(missing.status).toBe(422);
  expect(missing.body.error.errors).toEqual([expect.objectContaining({ field: 'image' })]);
  expect((await upload(PNG, 'x.png', { key: acct.project.publicKey })).status).toBe(401);
  for (const p of [`/uploads/${acct.project.id}/..%2F..%2Fpostgres-password`, `/uploads/${acct.project.id}/${crypto.randomUUID()}.png`, '/uploads/x/y.png']) {
    expect((await fetch(`${svc.api.baseUrl}${p}`)).status).toBe(404);
  }
});

/** A stand-in for an S3-compatible bucket: keeps objects in memory and refuses any request whose SigV4 signature does not hold. */
class S3Fake {
  readonly objects = new Map<string, { body: Buffer; type: string }>();
  refused = 0;
  readonly sessionTokens: string[] = [];
  url = '';
  private server?: http.Server;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', async () => {
        const body = Buffer.concat(chunks);
        const auth = String(req.headers.authorization ?? '');
        const signed = /SignedHeaders=([^,]+)/.exec(auth)?.[1].split(';') ?? [];
        this.sessionTokens.push(String(req.headers['x-amz-security-token']));
        // The signature recomputed from what arrived, with the bucket's own credentials.
        const { headers } = await new AwsV4Signer({
          method: req.method!,
          url: `http://${req.headers.host}${req.url}`,
          headers: Object.fromEntries(
            signed.filter((h) => !['host', 'x-amz-date', 'x-amz-security-token'].includes(h)).map((h) => [h, String(req.headers[h])]),
          ),
          accessKeyId: 'AKIDTEST',
          secretAccessKey: 'secret-test',
          sessionToken: 'session-test',
          region: 'eu-test-1',
          service: 's3',
          datetime: String(req.headers['x-amz-date']),
        }).sign();
        if (auth !== headers.get('authorization') || req.headers['x-amz-content-sha256'] !== crypto.createHash('sha256').update(body).digest('hex')) {
          this.refused++;
          res.statusCode = 403;
          return res.end('<Error><Code>SignatureDoesNotMatch</Code></Error>');
        }
        const key = decodeURIComponent(req.url!.replace(/^\/media\//, ''));
        if (req.method === 'PUT') {
          this.objects.set(key, { body, type: String(req.headers['content-type']) });
          return res.end();
        }
        const found = this.objects.get(key);
        if (!found) {
          res.statusCode = 404;
          return res.end('<Error><Code>NoSuchKey</Code></Error>');
        }
        res.setHeader('content-type', found.type);
        res.end(found.body);
      });
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    this.url = `http://127.0.0.1:${(this.server.address() as net.AddressInfo).port}`;
    return this;
  }

  stop(): void {
    this.server?.close();
  }
}

describe('with an S3-compatible bucket', () => {
  let s3: S3Fake;
  let bucketed: TestService;
  let owner: Account;

  beforeAll(async () => {
    s3 = await new S3Fake().start();
    bucketed = await startTestService({
      S3_BUCKET: 'media',
      S3_ENDPOINT: s3.url,
      S3_REGION: 'eu-test-1',
      S3_ACCESS_KEY_ID: 'AKIDTEST',
      S3_SECRET_ACCESS_KEY: 'secret-test',
      S3_SESSION_TOKEN: 'session-test',
    });
    owner = await createAccount(bucketed.api);
  });
  afterAll(async () => {
    await bucketed.stop();
    s3.stop();
  });

  test('images go to the bucket under uploads/<projectId>/, signed, and are served back through the service', async () => {
    expect((await bucketed.api.get('/config')).body.s3Uploads).toBe(true);
    const form = new FormData();
    form.append('image', new Blob([PNG], { type: 'image/png' }), 'a.png');
    const res = await fetch(`${bucketed.api.baseUrl}/uploads/image`, {
      method: 'POST',
      body: form,
      headers: { authorization: `Bearer ${owner.project.secretKey}` },
    });
    expect(res.status).toBe(201);
    const { url } = (await res.json()) as { url: string };
    const name = url.split('/').pop()!;
    expect(s3.refused).toBe(0);
    // Temporary credentials: the session token goes with every request, inside the signature.
    expect(new Set(s3.sessionTokens)).toEqual(new Set(['session-test']));
    expect([...s3.objects.keys()]).toEqual([`uploads/${owner.project.id}/${name}`]);
    expect(s3.objects.get(`uploads/${owner.project.id}/${name}`)).toEqual({ body: PNG, type: 'image/png' });
    expect(fs.existsSync(path.join(bucketed.dataDir, 'uploads'))).toBe(false);

    const served = await fetch(url);
    expect(served.status).toBe(200);
    expect(served.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await served.arrayBuffer()).equals(PNG)).toBe(true);
    expect((await fetch(`${bucketed.api.baseUrl}/uploads/${owner.project.id}/${crypto.randomUUID()}.png`)).status).toBe(404);
  });

  test('S3_BUCKET without its endpoint and keys stops start-up with a clear message', () => {
    expect(() => loadConfig({ S3_BUCKET: 'media' })).toThrow('Invalid configuration: S3_ENDPOINT: required when S3_BUCKET is set');
  });
});
