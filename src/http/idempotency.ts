import type { Context, Next } from 'koa';
import type { EntityManager } from '@mikro-orm/postgresql';
import { claimIdempotencyKey, claimRetryAfter, recordKeyOutcome, releaseKey, releaseUnfinished } from '../db/idempotency-keys';
import { documented } from './endpoint';
import { AppError, badRequest, conflict } from '../errors';

const PRINTABLE_ASCII = /^[\x20-\x7e]{1,255}$/;

/**
 * `Idempotency-Key` for /v1/send and /v1/track. The key is claimed by an insert on the unique
 * (project, key) before the handler runs, so concurrent duplicates cannot both run. A 4xx outcome
 * releases the key; 2xx and 5xx keep it. An expired key is taken over in the same statement.
 */
export function idempotency(ttlHours: number) {
  return documented(
    async (ctx: Context, next: Next): Promise<void> => {
      const key = ctx.get('idempotency-key');
      const project = ctx.state.project;
      if (!ctx.headers['idempotency-key'] || !project) return next();
      if (!PRINTABLE_ASCII.test(key)) {
        throw badRequest('Idempotency-Key must be 1-255 printable ASCII characters', 'INVALID_IDEMPOTENCY_KEY');
      }
      const em: EntityManager = ctx.state.em;
      const request = `${ctx.method} ${ctx.path}`;
      const earlier = await claimIdempotencyKey(em, project.id, key, request, ttlHours);
      if (earlier !== null) {
        const row = earlier.row;
        // Still in flight (or cut by a crash): when a retry could be taken over.
        const inFlight = row && row.status_code === null;
        const retryAfter = inFlight ? claimRetryAfter(row) : 0;
        throw conflict('This Idempotency-Key has already been used', 'IDEMPOTENCY_KEY_REUSED', {
          ...(inFlight ? { headers: { 'Retry-After': String(retryAfter) } } : {}),
          details: {
            key,
            originalRequest: row?.request ?? request,
            originalRequestAt: row ? new Date(row.created_at).toISOString() : null,
            originalStatusCode: row?.status_code ?? null,
          },
          suggestion: 'Use a new Idempotency-Key for a new request',
        });
      }

      const claim = { key, outcomeInTransaction: false };
      ctx.state.idempotency = claim;
      let status = 500;
      try {
        await next();
        status = ctx.status;
      } catch (err) {
        status = err instanceof AppError ? err.status : 500;
        throw err;
      } finally {
        if (status >= 400 && status < 500) {
          await releaseKey(em, project.id, key);
        } else if (claim.outcomeInTransaction) {
          // The key says 200 exactly when the handler's writes committed. Still without an outcome, nothing
          // was written (the database went away, say): the key is let go, so the client's retry runs at once,
          // not after the abandoned-claim wait; if the database is away, as soon as it is back.
          if (status >= 500) void releaseUnfinished(em, project.id, key, ctx.state.log);
        } else {
          await recordKeyOutcome(em, project.id, key, status);
        }
      }
    },
    { idempotencyKey: true },
  );
}
