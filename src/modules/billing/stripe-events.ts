import { type EntityManager, LockMode } from '@mikro-orm/postgresql';
import { isUuid } from '../../db/ids';
import { transaction } from '../../db/orm';
import { conflict } from '../../errors';
import { ProcessedStripeEvent, ProjectBilling } from './billing.entity';
import { applyCheckout } from './billing.queries';

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
    const fresh = await tx.createQueryBuilder(ProcessedStripeEvent).insert({ id: event.id, type: event.type }).onConflict('id').ignore().execute('run');
    if (!fresh.affectedRows) return 'duplicate';
    const o = event.data?.object ?? {};
    if (event.type === 'checkout.session.completed') {
      const projectId = String(o.client_reference_id ?? o.metadata?.projectId ?? '');
      if (!isUuid(projectId) || typeof o.customer !== 'string') return 'ignored';
      // Paid (or free) now; a delayed payment method reports through the subscription's own events.
      const status = o.payment_status === 'paid' || o.payment_status === 'no_payment_required' ? 'active' : 'incomplete';
      const subscription = typeof o.subscription === 'string' ? o.subscription : null;
      return (await applyCheckout(tx, projectId, { customer: o.customer, subscription, status, created })) ? 'applied' : 'ignored';
    }
    if (event.type.startsWith('customer.subscription.') && typeof o.customer === 'string') {
      const status = event.type === 'customer.subscription.deleted' ? 'canceled' : String(o.status ?? 'unknown');
      const [billing] = await tx.find(ProjectBilling, { stripeCustomerId: o.customer }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      if (!billing) throw conflict('No project has this Stripe customer yet; deliver the event again later', 'UNKNOWN_CUSTOMER');
      if (billing.stripeEventAt && billing.stripeEventAt > created) return 'stale';
      Object.assign(billing, { subscriptionStatus: status, stripeSubscriptionId: typeof o.id === 'string' ? o.id : null, stripeEventAt: created });
      return 'applied';
    }
    return 'ignored';
  });
}

export async function stripeCustomerOf(em: EntityManager, projectId: string) {
  const billing = await em.findOne(ProjectBilling, { projectId });
  return { customer: billing?.stripeCustomerId ?? null, subscriptionStatus: billing?.subscriptionStatus ?? null };
}
