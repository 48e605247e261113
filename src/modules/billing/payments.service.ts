import type { EntityManager } from '@mikro-orm/postgresql';
import { badRequest, conflict } from '../../errors';
import { stripeCustomerOf } from './stripe-events';
import { StripeClient } from './stripe';

export interface BillingSettings {
  publicUrl: string;
  stripe?: { secretKey: string; apiBase: string; priceId?: string; webhookSecret?: string };
}

export interface InvoiceDto {
  id: string;
  number: string | null;
  status: string | null;
  currency: string;
  total: number;
  amountDue: number;
  amountPaid: number;
  createdAt: string | null;
  periodStart: string | null;
  periodEnd: string | null;
  url: string | null;
  pdf: string | null;
}

const notEnabled = () =>
  badRequest('Billing is not enabled on this deployment', 'BILLING_NOT_ENABLED', { suggestion: 'Set STRIPE_SECRET_KEY to enable payments' });

const iso = (s?: number) => (s ? new Date(s * 1000).toISOString() : null);

/** A project's payments through Stripe: checkout, the customer portal and invoices; each refuses while STRIPE_SECRET_KEY is unset. */
export class Payments {
  private readonly stripe?: StripeClient;

  constructor(private readonly settings: BillingSettings) {
    this.stripe = settings.stripe ? new StripeClient(settings.stripe.secretKey, settings.stripe.apiBase) : undefined;
  }

  private client(): StripeClient {
    if (!this.stripe) throw notEnabled();
    return this.stripe;
  }

  /** A subscription Checkout session for the project; `requestId` keys it, so a retried request makes one session. */
  async checkout(
    em: EntityManager,
    projectId: string,
    payer: { email: string; requestId: string },
    input: { priceId?: string; successUrl?: string; cancelUrl?: string },
  ): Promise<{ id: string; url: string | null }> {
    const stripe = this.client();
    const price = input.priceId ?? this.settings.stripe!.priceId;
    if (!price) throw badRequest('No price to subscribe to: pass priceId or set STRIPE_PRICE_ID', 'NO_PRICE');
    const { customer } = await stripeCustomerOf(em, projectId);
    const session = await stripe.createCheckoutSession(
      {
        price,
        projectId,
        customer: customer ?? undefined,
        customerEmail: payer.email,
        successUrl: input.successUrl ?? `${this.settings.publicUrl}/?checkout=success`,
        cancelUrl: input.cancelUrl ?? `${this.settings.publicUrl}/?checkout=cancelled`,
      },
      `checkout:${projectId}:${payer.requestId}`,
    );
    return { id: session.id, url: session.url };
  }

  /** A customer portal session for the project's Stripe customer: 409 NO_BILLING_ACCOUNT before its first checkout. */
  async portal(em: EntityManager, projectId: string, requestId: string, input: { returnUrl?: string }): Promise<{ url: string }> {
    const stripe = this.client();
    const { customer } = await stripeCustomerOf(em, projectId);
    if (!customer) throw conflict('The project has no billing account yet; complete a checkout first', 'NO_BILLING_ACCOUNT');
    const session = await stripe.createPortalSession(customer, input.returnUrl ?? this.settings.publicUrl, `portal:${projectId}:${requestId}`);
    return { url: session.url };
  }

  /** The project's last 24 invoices, newest first, and its subscription status; none before its first checkout. */
  async invoices(em: EntityManager, projectId: string): Promise<{ subscriptionStatus: string | null; data: InvoiceDto[] }> {
    const stripe = this.client();
    const { customer, subscriptionStatus } = await stripeCustomerOf(em, projectId);
    if (!customer) return { data: [], subscriptionStatus };
    const invoices = await stripe.listInvoices(customer, 24);
    return {
      subscriptionStatus,
      data: invoices.data.map((i) => ({
        id: i.id,
        number: i.number,
        status: i.status,
        currency: i.currency,
        total: i.total,
        amountDue: i.amount_due,
        amountPaid: i.amount_paid,
        createdAt: iso(i.created),
        periodStart: iso(i.period_start),
        periodEnd: iso(i.period_end),
        url: i.hosted_invoice_url ?? null,
        pdf: i.invoice_pdf ?? null,
      })),
    };
  }
}
