import type { Context, Next } from 'koa';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { sql } from '../db/orm';
import { whileUnreachable } from '../db/unreachable';
import { documented } from './endpoint';
import { AppError, badRequest, conflict } from './errors';

const PRINTABLE_ASCII = /^[\x20-\x7e]{1,255}$/;

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
export const claimRetryAfter = (row: KeyRow) =>
  Math.max(1, Math.ceil(ABANDONED_CLAIM_SECONDS - (Date.now() - new Date(row.created_at).getTime()) / 1000));

/**
 * `Idempotency-Key` for /v1/send and /v1/track. The key is claimed by an insert on the unique
 * (project, key) before the handler runs, so concurrent duplicates cannot both run. A 4xx outcome
 * releases the key; 2xx and 5xx keep it. An expired key is taken over in the same statement.
 */
export function idempotency(ttlHours: number) {
  return documented(async (ctx: Context, next: Next): Promise<void> => {
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
        await sql(em, `DELETE FROM idempotency_keys WHERE project_id = ? AND key = ?`, [project.id, key]);
      } else if (claim.outcomeInTransaction) {
        // The key says 200 exactly when the handler's writes committed. Still without an outcome, nothing
        // was written (the database went away, say): the key is let go, so the client's retry runs at once,
        // not after the abandoned-claim wait; if the database is away, as soon as it is back.
        if (status >= 500) void releaseUnfinished(em, project.id, key, ctx.state.log);
      } else {
        await sql(em, `UPDATE idempotency_keys SET status_code = ? WHERE project_id = ? AND key = ? AND status_code IS DISTINCT FROM ?`, [
          status,
          project.id,
          key,
          status,
        ]);
      }
    }
  }, { idempotencyKey: true });
}

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
