import type { EntityManager } from '@mikro-orm/postgresql';
import { isUuid } from '../../db/ids';
import { sql } from '../../db/orm';

export interface StripeEvent {
  id: string;
  type: string;
  data: { object: Record<string, any> };
}

/**
 * Applies a verified Stripe event once (its id is remembered in the same transaction): a completed
 * checkout ties the Stripe customer and subscription to the project named by its client reference; a
 * subscription change updates its status. Other types are acknowledged and ignored.
 */
export async function applyStripeEvent(em: EntityManager, event: StripeEvent): Promise<'applied' | 'ignored' | 'duplicate'> {
  return em.transactional(async (tx) => {
    const fresh = await sql(tx, `INSERT INTO stripe_events (id, type) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1`, [event.id, event.type]);
    if (!fresh.length) return 'duplicate';
    const o = event.data?.object ?? {};
    if (event.type === 'checkout.session.completed') {
      const projectId = String(o.client_reference_id ?? o.metadata?.projectId ?? '');
      if (!isUuid(projectId) || typeof o.customer !== 'string') return 'ignored';
      const rows = await sql(
        tx,
        `INSERT INTO project_billing (project_id, stripe_customer_id, stripe_subscription_id, subscription_status)
         SELECT id, ?, ?, 'active' FROM projects WHERE id = ?
         ON CONFLICT (project_id) DO UPDATE SET stripe_customer_id = EXCLUDED.stripe_customer_id,
           stripe_subscription_id = EXCLUDED.stripe_subscription_id, subscription_status = 'active', updated_at = now()
         RETURNING 1`,
        [o.customer, typeof o.subscription === 'string' ? o.subscription : null, projectId],
      );
      return rows.length ? 'applied' : 'ignored';
    }
    if (event.type.startsWith('customer.subscription.') && typeof o.customer === 'string') {
      const status = event.type === 'customer.subscription.deleted' ? 'canceled' : String(o.status ?? 'unknown');
      const rows = await sql(
        tx,
        `UPDATE project_billing SET subscription_status = ?, stripe_subscription_id = ?, updated_at = now() WHERE stripe_customer_id = ? RETURNING 1`,
        [status, typeof o.id === 'string' ? o.id : null, o.customer],
      );
      return rows.length ? 'applied' : 'ignored';
    }
    return 'ignored';
  });
}

export async function stripeCustomerOf(em: EntityManager, projectId: string) {
  const [row] = await sql<{ stripe_customer_id: string | null; subscription_status: string | null }>(
    em,
    `SELECT stripe_customer_id, subscription_status FROM project_billing WHERE project_id = ?`,
    [projectId],
  );
  return { customer: row?.stripe_customer_id ?? null, subscriptionStatus: row?.subscription_status ?? null };
}
