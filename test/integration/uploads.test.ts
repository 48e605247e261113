import fs from 'node:fs';
import path from 'node:path';
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
  const res = await fetch(`${svc.api.baseUrl}/uploads/image`, { method: 'POST', body: form, headers: { authorization: `Bearer ${opts.key ?? acct.project.secretKey}` } });
  return { status: res.status, body: (await res.json()) as any };
}

test('an image is stored and served back, publicly, at a URL under PUBLIC_URL, with the type its bytes say', async () => {
  const res = await upload(PNG, 'photo.jpeg', { type: 'image/jpeg' });
  expect(res.status).toBe(201);
  expect(res.body).toEqual({ id: expect.any(String), url: expect.stringMatching(new RegExp(`^https://mail\\.example\\.test/uploads/${acct.project.id}/[0-9a-f-]{36}\\.png$`)), contentType: 'image/png', size: PNG.length });
  const served = await fetch(`${svc.api.baseUrl}${new URL(res.body.url).pathname}`);
  expect(served.status).toBe(200);
  expect(served.headers.get('content-type')).toBe('image/png');
  expect(served.headers.get('x-content-type-options')).toBe('nosniff');
  expect(Buffer.from(await served.arrayBuffer()).equals(PNG)).toBe(true);
});

test('SVG and files that only claim to be images are refused with 415; nothing is stored', async () => {
  const svg = await upload('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>', 'logo.svg', { type: 'image/svg+xml' });
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
