import crypto from 'node:crypto';

// Randomness drawn in 4 KiB batches: one system call per 256 ids instead of one per id.
const pool = Buffer.alloc(4096);
let offset = pool.length;
function randomBytes16(): Buffer {
  if (offset + 16 > pool.length) {
    crypto.randomFillSync(pool);
    offset = 0;
  }
  const out = Buffer.from(pool.subarray(offset, offset + 16));
  offset += 16;
  return out;
}

/**
 * UUIDv7 (RFC 9562): time-ordered, so new rows land at the right edge of their B-tree indexes
 * instead of splitting pages at random.
 */
export function newId(): string {
  const bytes = randomBytes16();
  const ms = BigInt(Date.now());
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6] & 0x0f) | 0x70;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (s: string): boolean => UUID.test(s);
