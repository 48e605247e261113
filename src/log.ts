import { AsyncLocalStorage } from 'node:async_hooks';
import pino, { type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Fields every line logged inside `withLogContext` carries, whichever logger writes it. */
const logContext = new AsyncLocalStorage<Record<string, unknown>>();

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'postbox' },
      timestamp: pino.stdTimeFunctions.isoTime,
      // A copy: pino merges each line's own fields into the object the mixin returns.
      mixin: () => ({ ...logContext.getStore() }),
    },
    destination,
  );
}

/**
 * Runs `fn` with `fields` on every log line it causes, including lines from services and libraries
 * that hold the process logger. Once `fn` settles the fields are dropped, so work that outlives it
 * (a pooled connection it opened, a listener it woke) does not go on logging under its name.
 */
export async function withLogContext<T>(fields: Record<string, unknown>, fn: () => Promise<T>): Promise<T> {
  const store = { ...fields };
  try {
    return await logContext.run(store, fn);
  } finally {
    for (const key of Object.keys(store)) delete store[key];
  }
}
