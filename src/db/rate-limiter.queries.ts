import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from './orm';

/**
 * Adds `n` requests to a project's shared counter for the window starting at `windowStartSeconds` and
 * answers the count after it: an upsert that increments in place, because every API process reserves
 * blocks of the same window at once.
 */
export async function reserveInWindow(em: EntityManager, projectId: string, windowStartSeconds: number, n: number): Promise<number> {
  const rows = await sql<{ count: number }>(
    em,
    `INSERT INTO rate_limit_windows (project_id, window_start, count) VALUES (?, to_timestamp(?), ?)
     ON CONFLICT (project_id, window_start) DO UPDATE SET count = rate_limit_windows.count + EXCLUDED.count
     RETURNING count`,
    [projectId, windowStartSeconds, n],
  );
  return Number(rows[0].count);
}

/** `reserveInWindow` for one key of a project (the public key's budget, one client's share of it). */
export async function reserveInKeyWindow(em: EntityManager, projectId: string, key: string, windowStartSeconds: number, n: number): Promise<number> {
  const rows = await sql<{ count: number }>(
    em,
    `INSERT INTO rate_limit_key_windows (project_id, key, window_start, count) VALUES (?, ?, to_timestamp(?), ?)
     ON CONFLICT (project_id, key, window_start) DO UPDATE SET count = rate_limit_key_windows.count + EXCLUDED.count
     RETURNING count`,
    [projectId, key, windowStartSeconds, n],
  );
  return Number(rows[0].count);
}

/** The same counter per key (an IP, an address) of a project: one upsert, since concurrent requests count the same row. */
export async function countInKeyWindow(em: EntityManager, projectId: string, key: string, windowStartSeconds: number): Promise<number> {
  const rows = await sql<{ count: number }>(
    em,
    `INSERT INTO rate_limit_key_windows (project_id, key, window_start, count) VALUES (?, ?, to_timestamp(?), 1)
     ON CONFLICT (project_id, key, window_start) DO UPDATE SET count = rate_limit_key_windows.count + 1
     RETURNING count`,
    [projectId, key, windowStartSeconds],
  );
  return Number(rows[0].count);
}
