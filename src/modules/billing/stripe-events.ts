import type { EntityManager } from '@mikro-orm/postgresql';
import { isUuid } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { conflict } from '../../http/errors';

export interface StripeEvent {
  id: string;
  type: string;
  /** Unix seconds. */
  created?: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Stripe's objects differ by event type
  data: { object: Record<string, any> };
}

/**
 * Applies a verified Stripe event once (its id is remembered in the same transaction): a completed
 * checkout ties the Stripe customer and subscription to the project named by its client reference; a
 * subscription change updates its status. Stripe does not deliver in order: an event older than the
 * last one applied changes nothing, and a subscription event for a customer not yet tied to a project
 * (its checkout still on its way) is refused with 409 and not remembered, so Stripe delivers it again.
 * Other types are acknowledged and ignored.
 */
export async function applyStripeEvent(em: EntityManager, event: StripeEvent): Promise<'applied' | 'ignored' | 'duplicate' | 'stale'> {
  const created = new Date((event.created ?? Date.now() / 1000) * 1000);
  return transaction(em, async (tx) => {
    const fresh = await sql(tx, `INSERT INTO stripe_events (id, type) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1`, [event.id, event.type]);
    if (!fresh.length) return 'duplicate';
    const o = event.data?.object ?? {};
    if (event.type === 'checkout.session.completed') {
      const projectId = String(o.client_reference_id ?? o.metadata?.projectId ?? '');
      if (!isUuid(projectId) || typeof o.customer !== 'string') return 'ignored';
      // Paid (or free) now; a delayed payment method reports through the subscription's own events.
      const status = o.payment_status === 'paid' || o.payment_status === 'no_payment_required' ? 'active' : 'incomplete';
      const rows = await sql<{ applied: boolean }>(
        tx,
        `INSERT INTO project_billing (project_id, stripe_customer_id, stripe_subscription_id, subscription_status, stripe_event_at)
         SELECT id, ?, ?, ?, ? FROM projects WHERE id = ?
         ON CONFLICT (project_id) DO UPDATE SET stripe_customer_id = EXCLUDED.stripe_customer_id,
           stripe_subscription_id = EXCLUDED.stripe_subscription_id,
           subscription_status = CASE WHEN project_billing.stripe_event_at > EXCLUDED.stripe_event_at THEN project_billing.subscription_status ELSE EXCLUDED.subscription_status END,
           stripe_event_at = greatest(project_billing.stripe_event_at, EXCLUDED.stripe_event_at), updated_at = now()
         RETURNING true AS applied`,
        [o.customer, typeof o.subscription === 'string' ? o.subscription : null, status, created, projectId],
      );
      return rows.length ? 'applied' : 'ignored';
    }
    if (event.type.startsWith('customer.subscription.') && typeof o.customer === 'string') {
      const status = event.type === 'customer.subscription.deleted' ? 'canceled' : String(o.status ?? 'unknown');
      const [row] = await sql<{ newer: boolean }>(
        tx,
        `SELECT coalesce(stripe_event_at > ?, false) AS newer FROM project_billing WHERE stripe_customer_id = ? FOR UPDATE`,
        [created, o.customer],
      );
      if (!row) throw conflict('No project has this Stripe customer yet; deliver the event again later', 'UNKNOWN_CUSTOMER');
      if (row.newer) return 'stale';
      await sql(
        tx,
        `UPDATE project_billing SET subscription_status = ?, stripe_subscription_id = ?, stripe_event_at = ?, updated_at = now() WHERE stripe_customer_id = ?`,
        [status, typeof o.id === 'string' ? o.id : null, created, o.customer],
      );
      return 'applied';
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
