import crypto from 'node:crypto';
import { AppError } from '../../http/errors';

/** Signed Stripe-Signature headers older than this are refused (Stripe's own default tolerance). */
const SIGNATURE_TOLERANCE_SECONDS = 300;

export class StripeError extends AppError {}

/** Form encoding as the Stripe API takes it: nested keys in brackets (`line_items[0][price]`). */
function form(params: Record<string, unknown>, prefix = ''): string[] {
  return Object.entries(params).flatMap(([k, v]) => {
    const key = prefix ? `${prefix}[${k}]` : k;
    if (v === undefined || v === null) return [];
    if (typeof v === 'object') return form(v as Record<string, unknown>, key);
    return [`${encodeURIComponent(key)}=${encodeURIComponent(String(v))}`];
  });
}

/** The few Stripe API calls billing makes, over plain HTTPS with the secret key. */
export class StripeClient {
  constructor(
    private readonly secretKey: string,
    private readonly base: string,
  ) {}

  private async call<T>(method: 'GET' | 'POST', path: string, params: Record<string, unknown>): Promise<T> {
    const encoded = form(params).join('&');
    const url = `${this.base.replace(/\/+$/, '')}${path}${method === 'GET' && encoded ? `?${encoded}` : ''}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${this.secretKey}`, ...(method === 'POST' ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
        body: method === 'POST' ? encoded : undefined,
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      throw new StripeError(502, 'PAYMENT_PROVIDER_UNAVAILABLE', `Stripe could not be reached: ${(err as Error).message}`);
    }
    const body = (await res.json().catch(() => ({}))) as T & { error?: { message?: string } };
    if (!res.ok) throw new StripeError(502, 'PAYMENT_PROVIDER_ERROR', `Stripe answered ${res.status}: ${body.error?.message ?? 'no message'}`);
    return body;
  }

  createCheckoutSession(p: { price: string; projectId: string; customer?: string; customerEmail?: string; successUrl: string; cancelUrl: string }) {
    return this.call<{ id: string; url: string }>('POST', '/v1/checkout/sessions', {
      mode: 'subscription',
      line_items: { 0: { price: p.price, quantity: 1 } },
      success_url: p.successUrl,
      cancel_url: p.cancelUrl,
      client_reference_id: p.projectId,
      metadata: { projectId: p.projectId },
      customer: p.customer,
      customer_email: p.customer ? undefined : p.customerEmail,
    });
  }

  createPortalSession(customer: string, returnUrl: string) {
    return this.call<{ id: string; url: string }>('POST', '/v1/billing_portal/sessions', { customer, return_url: returnUrl });
  }

  listInvoices(customer: string, limit: number) {
    return this.call<{ data: StripeInvoice[]; has_more: boolean }>('GET', '/v1/invoices', { customer, limit });
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
 * Checks a `Stripe-Signature` header (`t=<unix time>,v1=<hex HMAC-SHA256 of "t.body">`, possibly
 * several v1 during a secret roll) against the raw body, in constant time, within the tolerance.
 */
export function verifyStripeSignature(header: string | undefined, rawBody: string, secret: string, nowSeconds = Date.now() / 1000): boolean {
  if (!header) return false;
  const parts = header.split(',').map((p) => p.split('=', 2) as [string, string]);
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  const signatures = parts.filter(([k]) => k === 'v1').map(([, v]) => v);
  if (!Number.isFinite(t) || signatures.length === 0) return false;
  if (Math.abs(nowSeconds - t) > SIGNATURE_TOLERANCE_SECONDS) return false;
  const expected = crypto.createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
  return signatures.some((s) => {
    const given = Buffer.from(s, 'hex');
    return given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
}
