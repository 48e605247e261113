import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

/**
 * Turns subscriptions left `pending` past the confirmation expiry into `unsubscribed` (never deleting the
 * row: for an opt_in topic no row means subscribed), unless a confirmation that still works covers them.
 * One set-based statement, because the maintenance run touches every project at once. Answers how many.
 */
export async function expirePendingTopics(em: EntityManager, expiryHours: number): Promise<number> {
  const rows = await sql<{ n: number }>(
    em,
    `WITH expired AS (
       UPDATE contact_topics ct SET state = 'unsubscribed', updated_at = now()
        WHERE ct.state = 'pending' AND ct.updated_at < now() - make_interval(secs => ?)
          AND NOT EXISTS (
            SELECT 1 FROM consent_confirmations c
             WHERE c.contact_id = ct.contact_id AND c.confirmed_at IS NULL AND c.expires_at > now() AND c.topic_ids \\? ct.topic_id::text)
       RETURNING 1)
     SELECT count(*)::int AS n FROM expired`,
    [expiryHours * 3600],
  );
  return rows[0].n;
}
