import crypto from 'node:crypto';
import { promisify } from 'node:util';

const scrypt = promisify(crypto.scrypt) as (pw: string, salt: Buffer, len: number, opts: crypto.ScryptOptions) => Promise<Buffer>;
// OWASP's minimum for scrypt (N=2^17, r=8, p=1): 128 MiB and about half a second of one core per hash.
const PARAMS = { N: 2 ** 17, r: 8, p: 1 };
const KEY_LEN = 64;
// scrypt needs 128·N·r bytes; Node's default ceiling (32 MiB) would refuse N=2^17.
const MAX_MEM = 256 * 1024 * 1024;

/** A hash of the current parameters that matches no password: unknown users cost what known ones do. */
export const DUMMY_HASH = ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, Buffer.alloc(16).toString('base64'), Buffer.alloc(KEY_LEN).toString('base64')].join('$');

/** Whether a stored hash was made with weaker parameters than today's (rehash it on the next login). */
export function needsRehash(stored: string): boolean {
  const [scheme, n, r, p] = stored.split('$');
  return scheme !== 'scrypt' || Number(n) < PARAMS.N || Number(r) < PARAMS.r || Number(p) < PARAMS.p;
}

/** `scrypt$N$r$p$<salt b64>$<hash b64>`, so parameters can be raised later without breaking old hashes. */
export async function hashPassword(password: string): Promise<string> {
  const salt = crypto.randomBytes(16);
  const hash = await scrypt(password, salt, KEY_LEN, { ...PARAMS, maxmem: MAX_MEM });
  return ['scrypt', PARAMS.N, PARAMS.r, PARAMS.p, salt.toString('base64'), hash.toString('base64')].join('$');
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const actual = await scrypt(password, Buffer.from(salt, 'base64'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: MAX_MEM,
  });
  return crypto.timingSafeEqual(actual, expected);
}
