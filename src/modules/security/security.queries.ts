import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

// The security module's hand-written SQL: each statement says why the EntityManager does not make it.

/**
 * SQL, an aggregate over two other modules' tables: the permanent bounces and complaints recorded since
 * `since` of mail sent since then, each event matched to its email by the id in its data.
 */
export async function lateReportsSince(em: EntityManager, projectId: string, since: Date): Promise<{ bounced: number; complained: number }> {
  const [row] = await sql<{ bounced: string; complained: string }>(
    em,
    `SELECT count(*) FILTER (WHERE e.name = 'email.bounce' AND e.data->>'bounceType' = 'Permanent') AS bounced,
            count(*) FILTER (WHERE e.name = 'email.complaint') AS complained
     FROM events e JOIN emails m ON m.id = (e.data->>'emailId')::uuid
     WHERE e.project_id = ? AND e.name IN ('email.bounce', 'email.complaint') AND e.created_at >= ? AND m.sent_at >= ?`,
    [projectId, since, since],
  );
  return { bounced: Number(row.bounced), complained: Number(row.complained) };
}
