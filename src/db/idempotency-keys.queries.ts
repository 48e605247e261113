import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from './orm';

/** A key's row as a request that finds it taken is told about it. */
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
 * the key's row as it stands (absent only if it was deleted in between). The claim and the takeover must
 * be one statement: two requests with one key race.
 */
export async function claimKey(
  em: EntityManager,
  projectId: string,
  key: string,
  request: string,
  ttlHours: number,
  abandonedSeconds: number,
): Promise<{ row: KeyRow | undefined } | null> {
  const claimed = await sql(
    em,
    `INSERT INTO idempotency_keys (project_id, key, request, created_at) VALUES (?, ?, ?, now())
     ON CONFLICT (project_id, key) DO UPDATE
       SET request = EXCLUDED.request, created_at = EXCLUDED.created_at, status_code = NULL, response = NULL
       WHERE idempotency_keys.created_at < now() - make_interval(secs => ?)
          OR (idempotency_keys.status_code IS NULL AND idempotency_keys.created_at < now() - make_interval(secs => ?))
     RETURNING 1`,
    [projectId, key, request, ttlHours * 3600, abandonedSeconds],
  );
  if (claimed.length) return null;
  const [row] = await sql<KeyRow>(em, `SELECT request, created_at, status_code, response FROM idempotency_keys WHERE project_id = ? AND key = ?`, [
    projectId,
    key,
  ]);
  return { row };
}
