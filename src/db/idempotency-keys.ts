/**
 * The idempotency-key store every protocol shares: HTTP's `Idempotency-Key` middleware, SMTP
 * submission (by Message-ID) and the purge activity.
 */
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { sql } from './orm';
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

export interface KeyRow {
  request: string;
  created_at: Date;
  status_code: number | null;
  /** What the request answered, where its handler kept it (SMTP submissions). */
  response: unknown;
}

/**
 * Claims (project, key) for `request` by an insert on the unique pair; an expired key, or a claim
 * abandoned by a process that died, is taken over in the same statement. Null when claimed; otherwise
 * the key's row as it stands (absent only if it was deleted in between).
 */
export async function claimIdempotencyKey(
  em: EntityManager,
  projectId: string,
  key: string,
  request: string,
  ttlHours: number,
): Promise<{ row: KeyRow | undefined } | null> {
  const claimed = await sql(
    em,
    `INSERT INTO idempotency_keys (project_id, key, request, created_at) VALUES (?, ?, ?, now())
     ON CONFLICT (project_id, key) DO UPDATE
       SET request = EXCLUDED.request, created_at = EXCLUDED.created_at, status_code = NULL, response = NULL
       WHERE idempotency_keys.created_at < now() - make_interval(secs => ?)
          OR (idempotency_keys.status_code IS NULL AND idempotency_keys.created_at < now() - make_interval(secs => ?))
     RETURNING 1`,
    [projectId, key, request, ttlHours * 3600, ABANDONED_CLAIM_SECONDS],
  );
  if (claimed.length) return null;
  const [row] = await sql<KeyRow>(em, `SELECT request, created_at, status_code, response FROM idempotency_keys WHERE project_id = ? AND key = ?`, [
    projectId,
    key,
  ]);
  return { row };
}

/** Seconds until a claim still without an outcome can be taken over. */
export const claimRetryAfter = (row: KeyRow) => Math.max(1, Math.ceil(ABANDONED_CLAIM_SECONDS - (Date.now() - new Date(row.created_at).getTime()) / 1000));

/**
 * Records a 200 for the request's key inside the handler's own transaction, so the key says "done"
 * exactly when the writes are: a crash between the commit and the middleware's own update can then
 * never let a retry (after the claim is abandoned) do the work a second time.
 */
export async function markIdempotentSuccess(tx: EntityManager, projectId: string, claim: IdempotencyClaim | undefined, response?: unknown): Promise<void> {
  if (claim === undefined) return;
  await sql(tx, `UPDATE idempotency_keys SET status_code = 200, response = ?::jsonb WHERE project_id = ? AND key = ?`, [
    response === undefined ? null : JSON.stringify(response),
    projectId,
    claim.key,
  ]);
}

/** Lets a key go (its request was refused with 4xx): the same key may be used again at once. */
export async function releaseKey(em: EntityManager, projectId: string, key: string): Promise<void> {
  await sql(em, `DELETE FROM idempotency_keys WHERE project_id = ? AND key = ?`, [projectId, key]);
}

/** Records the status a request answered with, for a later request with the same key to be told. */
export async function recordKeyOutcome(em: EntityManager, projectId: string, key: string, status: number): Promise<void> {
  await sql(em, `UPDATE idempotency_keys SET status_code = ? WHERE project_id = ? AND key = ? AND status_code IS DISTINCT FROM ?`, [
    status,
    projectId,
    key,
    status,
  ]);
}

/** How long a released key is retried while the database is unreachable: past it, the abandoned-claim wait applies. */
const RELEASE_RETRY_MS = 60_000;

export async function releaseUnfinished(em: EntityManager, projectId: string, key: string, logger: Logger | undefined): Promise<void> {
  try {
    await whileUnreachable(() => sql(em.fork(), `DELETE FROM idempotency_keys WHERE project_id = ? AND key = ? AND status_code IS NULL`, [projectId, key]), {
      forMs: RELEASE_RETRY_MS,
    });
  } catch (err) {
    logger?.warn({ err, key }, 'could not release an Idempotency-Key whose request failed; a retry takes it over after a minute');
  }
}

/** Deletes keys past their time to live. */
export async function purgeExpiredIdempotencyKeys(em: EntityManager, ttlHours: number): Promise<number> {
  const rows = await sql<{ n: number }>(
    em,
    `WITH d AS (DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => ?) RETURNING 1)
     SELECT count(*)::int AS n FROM d`,
    [ttlHours * 3600],
  );
  return rows[0].n;
}
