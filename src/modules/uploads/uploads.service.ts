import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { newId } from '../../db/ids';
import { AppError } from '../../errors';
import type { S3Bucket } from './s3';

/** The formats accepted, told apart by their first bytes, never by the file's name or declared type. */
const FORMATS = [
  { ext: 'png', type: 'image/png', matches: (b: Buffer) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) },
  { ext: 'jpg', type: 'image/jpeg', matches: (b: Buffer) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
  { ext: 'gif', type: 'image/gif', matches: (b: Buffer) => ['GIF87a', 'GIF89a'].includes(b.subarray(0, 6).toString('latin1')) },
  {
    ext: 'webp',
    type: 'image/webp',
    matches: (b: Buffer) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP',
  },
] as const;

export const STORED_NAME = /^[0-9a-f-]{36}\.(png|jpg|gif|webp)$/;

function looksLikeSvg(head: Buffer): boolean {
  const text = head
    .toString('utf8')
    .replace(/^\uFEFF/, '')
    .trimStart()
    .toLowerCase();
  return text.startsWith('<svg') || (text.startsWith('<?xml') && text.includes('<svg')) || text.startsWith('<!doctype svg');
}

/** Where images are kept: under DATA_DIR, or in an S3-compatible bucket. */
export interface ImageStore {
  dataDir: string;
  bucket?: S3Bucket;
}

const objectKey = (projectId: string, name: string) => `uploads/${projectId}/${name}`;

/**
 * Keeps an uploaded image under `<dataDir>/uploads/<projectId>/` (or the bucket's `uploads/<projectId>/`)
 * with a name of the service's own, and answers its public URL. SVG is refused: it can carry script
 * that would run on our origin.
 */
export async function storeImage(store: ImageStore, opts: { publicUrl: string; projectId: string; tmpPath: string; size: number }) {
  const handle = await fs.promises.open(opts.tmpPath, 'r');
  const head = Buffer.alloc(512);
  try {
    await handle.read(head, 0, head.length, 0);
  } finally {
    await handle.close();
  }
  const format = FORMATS.find((f) => f.matches(head));
  if (!format) {
    throw new AppError(
      415,
      'UNSUPPORTED_MEDIA_TYPE',
      looksLikeSvg(head)
        ? 'SVG images are not accepted (they can carry scripts); upload a PNG, JPEG, GIF or WebP'
        : 'The file is not a PNG, JPEG, GIF or WebP image',
    );
  }
  const id = newId();
  const name = `${id}.${format.ext}`;
  if (store.bucket) {
    await store.bucket.put(objectKey(opts.projectId, name), await fs.promises.readFile(opts.tmpPath), format.type);
  } else {
    const dir = path.join(store.dataDir, 'uploads', opts.projectId);
    await fs.promises.mkdir(dir, { recursive: true });
    await fs.promises.copyFile(opts.tmpPath, path.join(dir, name));
  }
  return { id, url: `${opts.publicUrl}/uploads/${opts.projectId}/${name}`, contentType: format.type, size: opts.size };
}

/** The stored image as a stream with its type, or undefined; only names the service itself gave are looked up. */
export async function storedImage(store: ImageStore, projectId: string, name: string): Promise<{ body: Readable; type: string } | undefined> {
  if (!/^[0-9a-f-]{36}$/.test(projectId) || !STORED_NAME.test(name)) return undefined;
  const type = FORMATS.find((f) => f.ext === name.split('.').pop())!.type;
  if (store.bucket) {
    const res = await store.bucket.get(objectKey(projectId, name));
    return res?.body ? { body: Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), type } : undefined;
  }
  const file = path.join(store.dataDir, 'uploads', projectId, name);
  return fs.existsSync(file) ? { body: fs.createReadStream(file), type } : undefined;
}
