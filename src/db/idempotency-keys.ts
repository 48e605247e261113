/**
 * The idempotency-key store every protocol shares: HTTP's `Idempotency-Key` middleware, SMTP
 * submission (by Message-ID) and the purge activity.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { IdempotencyKeySchema } from './idempotency-keys.entity';
import { claimKey, type KeyRow } from './idempotency-keys.queries';
import { whileUnreachable } from './unreachable';

/**
 * A claim with no outcome this old belongs to a request whose process died (a request of these
 * endpoints answers in well under a second): it is taken over, so the client's retry with the same key
 * can ever succeed. Until then the retry is 409 with `originalStatusCode: null` and Retry-After.
 */
export const ABANDONED_CLAIM_SECONDS = 60;

/** The key a request claimed. */
export interface IdempotencyClaim {
  key: string;
  /**
   * Set by a handler, before its first query, that records its success with `markIdempotentSuccess` in
   * the transaction of its writes: then a key still without an outcome after a 5xx means nothing was written.
   */
  outcomeInTransaction: boolean;
}

export type { KeyRow };

/** Claims (project, key) for `request`: null when claimed, else the key's row as it stands. */
export const claimIdempotencyKey = (em: EntityManager, projectId: string, key: string, request: string, ttlHours: number) =>
  claimKey(em, projectId, key, request, ttlHours, ABANDONED_CLAIM_SECONDS);

/** Seconds until a claim still without an outcome can be taken over. */
export const claimRetryAfter = (row: KeyRow) => Math.max(1, Math.ceil(ABANDONED_CLAIM_SECONDS - (Date.now() - new Date(row.created_at).getTime()) / 1000));

/**
 * Records a 200 for the request's key inside the handler's own transaction, so the key says "done"
 * exactly when the writes are: a crash between the commit and the middleware's own update can then
 * never let a retry (after the claim is abandoned) do the work a second time.
 */
export async function markIdempotentSuccess(tx: EntityManager, projectId: string, claim: IdempotencyClaim | undefined, response?: unknown): Promise<void> {
  if (claim === undefined) return;
  await tx.nativeUpdate(IdempotencyKeySchema, { projectId, key: claim.key }, { statusCode: 200, response: response ?? null });
}

/** Lets a key go (its request was refused with 4xx): the same key may be used again at once. */
export async function releaseKey(em: EntityManager, projectId: string, key: string): Promise<void> {
  await em.nativeDelete(IdempotencyKeySchema, { projectId, key });
}

/** Records the status a request answered with, for a later request with the same key to be told. */
export async function recordKeyOutcome(em: EntityManager, projectId: string, key: string, status: number): Promise<void> {
  await em.nativeUpdate(IdempotencyKeySchema, { projectId, key, $or: [{ statusCode: null }, { statusCode: { $ne: status } }] }, { statusCode: status });
}

/** How long a released key is retried while the database is unreachable: past it, the abandoned-claim wait applies. */
const RELEASE_RETRY_MS = 60_000;

export async function releaseUnfinished(em: EntityManager, projectId: string, key: string, logger: Logger | undefined): Promise<void> {
  try {
    await whileUnreachable(() => em.fork().nativeDelete(IdempotencyKeySchema, { projectId, key, statusCode: null }), { forMs: RELEASE_RETRY_MS });
  } catch (err) {
    logger?.warn({ err, key }, 'could not release an Idempotency-Key whose request failed; a retry takes it over after a minute');
  }
}

/** Deletes keys past their time to live. */
export async function purgeExpiredIdempotencyKeys(em: EntityManager, ttlHours: number): Promise<number> {
  return em.nativeDelete(IdempotencyKeySchema, { createdAt: { $lt: new Date(Date.now() - ttlHours * 3_600_000) } });
}
