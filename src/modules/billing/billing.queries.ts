import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

// The billing module's hand-written SQL: each statement says why the EntityManager does not make it.

/** SQL: an advisory lock, held to the commit, has no EntityManager call. */
export async function lockProjectBilling(tx: EntityManager, projectId: string): Promise<void> {
  await sql(tx, `SELECT pg_advisory_xact_lock(hashtextextended('billing:' || ?, 0))`, [projectId]);
}

/**
 * SQL: one INSERT ... SELECT ... ON CONFLICT ties a checkout's customer to the project (only one that
 * exists), and its merge keeps a newer event's status, which the EntityManager's upsert cannot express.
 * Answers whether the project exists.
 */
export async function applyCheckout(
  tx: EntityManager,
  projectId: string,
  c: { customer: string; subscription: string | null; status: string; created: Date },
): Promise<boolean> {
  const rows = await sql(
    tx,
    `INSERT INTO project_billing (project_id, stripe_customer_id, stripe_subscription_id, subscription_status, stripe_event_at)
     SELECT id, ?, ?, ?, ? FROM projects WHERE id = ?
     ON CONFLICT (project_id) DO UPDATE SET stripe_customer_id = EXCLUDED.stripe_customer_id,
       stripe_subscription_id = EXCLUDED.stripe_subscription_id,
       subscription_status = CASE WHEN project_billing.stripe_event_at > EXCLUDED.stripe_event_at
         THEN project_billing.subscription_status ELSE EXCLUDED.subscription_status END,
       stripe_event_at = greatest(project_billing.stripe_event_at, EXCLUDED.stripe_event_at), updated_at = now()
     RETURNING true AS applied`,
    [c.customer, c.subscription, c.status, c.created, projectId],
  );
  return rows.length > 0;
}
