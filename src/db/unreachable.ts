/**
 * Whether an error says the database could not be reached, rather than what a statement did: no
 * SQLSTATE (a socket error, a dropped connection, a pool timeout), or a connection-class one.
 */
export function databaseUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return code.startsWith('08') || ['57P01', '57P02', '57P03', '53300', '40001', '40P01'].includes(code);
}

/**
 * Runs `write` until it succeeds, for as long as its failures are the database being unreachable and
 * `forMs` have not passed (PostgreSQL restarting, a failover). `waiting` runs before each new try.
 */
export async function whileUnreachable<T>(
  write: () => Promise<T>,
  opts: { forMs: number; waiting?: (err: unknown, attempt: number) => void; signal?: AbortSignal },
): Promise<T> {
  const deadline = Date.now() + opts.forMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (!databaseUnreachable(err) || Date.now() > deadline || opts.signal?.aborted) throw err;
      opts.waiting?.(err, attempt);
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
    }
  }
}
