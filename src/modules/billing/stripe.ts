import Stripe from 'stripe';
import { AppError } from '../../errors';

/**
 * Every call names this API version (the one the `stripe` package's types describe), so Stripe's
 * answers never change with the account's default version. Upgrading `stripe` moves it, on purpose.
 */
export const STRIPE_API_VERSION = '2026-10-28.endive' as const;

/** Signed Stripe-Signature headers older than this are refused (Stripe's own default tolerance). */
const SIGNATURE_TOLERANCE_SECONDS = 300;

export class StripeError extends AppError {}

/** The few Stripe API calls billing makes, through the official client with retries and idempotency keys. */
export class StripeClient {
  private readonly stripe: Stripe;

  constructor(secretKey: string, base: string) {
    const url = new URL(base);
    this.stripe = new Stripe(secretKey, {
      apiVersion: STRIPE_API_VERSION,
      // STRIPE_API_BASE: a stand-in of Stripe's API for tests and air-gapped trials.
      host: url.hostname,
      port: url.port || (url.protocol === 'http:' ? 80 : 443),
      protocol: url.protocol === 'http:' ? 'http' : 'https',
      // Network errors and 409/429/5xx are retried with backoff, under the same idempotency key.
      maxNetworkRetries: 2,
      timeout: 15_000,
      telemetry: false,
    });
  }

  private async call<T>(what: string, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      if (err instanceof Stripe.errors.StripeConnectionError) {
        throw new StripeError(502, 'PAYMENT_PROVIDER_UNAVAILABLE', `Stripe could not be reached (${what}): ${err.message}`);
      }
      const e = err as { statusCode?: number; message?: string };
      throw new StripeError(502, 'PAYMENT_PROVIDER_ERROR', `Stripe answered ${e.statusCode ?? 'an error'} (${what}): ${e.message ?? 'no message'}`);
    }
  }

  /** `idempotencyKey`: the same for every try of one request, so Stripe creates one session however often it is sent. */
  createCheckoutSession(
    p: { price: string; projectId: string; customer?: string; customerEmail?: string; successUrl: string; cancelUrl: string },
    idempotencyKey: string,
  ) {
    return this.call('checkout session', () =>
      this.stripe.checkout.sessions.create(
        {
          mode: 'subscription',
          line_items: [{ price: p.price, quantity: 1 }],
          success_url: p.successUrl,
          cancel_url: p.cancelUrl,
          client_reference_id: p.projectId,
          metadata: { projectId: p.projectId },
          ...(p.customer ? { customer: p.customer } : { customer_email: p.customerEmail }),
        },
        { idempotencyKey },
      ),
    );
  }

  createPortalSession(customer: string, returnUrl: string, idempotencyKey: string) {
    return this.call('billing portal session', () => this.stripe.billingPortal.sessions.create({ customer, return_url: returnUrl }, { idempotencyKey }));
  }

  async listInvoices(customer: string, limit: number): Promise<{ data: StripeInvoice[]; has_more: boolean }> {
    const page = await this.call('invoices', () => this.stripe.invoices.list({ customer, limit }));
    return page as unknown as { data: StripeInvoice[]; has_more: boolean };
  }
}

export interface StripeInvoice {
  id: string;
  number: string | null;
  status: string | null;
  currency: string;
  amount_due: number;
  amount_paid: number;
  total: number;
  created: number;
  period_start?: number;
  period_end?: number;
  hosted_invoice_url?: string | null;
  invoice_pdf?: string | null;
}

/**
 * Checks a `Stripe-Signature` header against the raw body with the `stripe` package's own verifier
 * (HMAC-SHA256, every `v1` of a secret roll, in constant time, within the tolerance).
 */
export function verifyStripeSignature(header: string | undefined, rawBody: string, secret: string): boolean {
  if (!header) return false;
  try {
    Stripe.webhooks.constructEvent(rawBody, header, secret, SIGNATURE_TOLERANCE_SECONDS);
    return true;
  } catch {
    return false;
  }
}
