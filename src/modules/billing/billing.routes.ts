import type Router from '@koa/router';
import type { Context } from 'koa';
import { AppError, badRequest, conflict } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, uuidParam } from '../../http/validate';
import { membership, requireRole } from '../accounts/accounts.service';
import { billingLimitsSchema, billingPortalSchema, checkoutSchema } from './billing.schemas';
import { billingConsumption, billingLimits, billingPeriod, setBillingLimits } from './billing.service';
import { applyStripeEvent, type StripeEvent, stripeCustomerOf } from './stripe-events';
import { StripeClient, verifyStripeSignature } from './stripe';

export interface BillingSettings {
  publicUrl: string;
  stripe?: { secretKey: string; apiBase: string; priceId?: string; webhookSecret?: string };
}

const WEBHOOK_MAX_BYTES = 1024 * 1024;

const notEnabled = () =>
  badRequest('Billing is not enabled on this deployment', 'BILLING_NOT_ENABLED', { suggestion: 'Set STRIPE_SECRET_KEY to enable payments' });

async function rawBody(ctx: Context): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req) {
    size += chunk.length;
    if (size > WEBHOOK_MAX_BYTES) throw new AppError(413, 'PAYLOAD_TOO_LARGE', 'Webhook body is larger than 1 MB');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Caps, consumption and payments of a project (cookie-authenticated): any member reads them; OWNER and
 * ADMIN change caps and pay. Payment calls go to Stripe only when STRIPE_SECRET_KEY is set.
 */
export function billingRoutes(router: Router, g: Guards, settings: BillingSettings): void {
  const stripe = settings.stripe ? new StripeClient(settings.stripe.secretKey, settings.stripe.apiBase) : undefined;
  const project = async (ctx: Context, manage: boolean) => {
    const id = uuidParam(ctx);
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    if (manage) requireRole(role, ['OWNER', 'ADMIN'], 'manage billing');
    return id;
  };
  const base = '/users/@me/projects/:id';

  router.get(`${base}/billing-limits`, g.session, async (ctx) => {
    const id = await project(ctx, false);
    const period = billingPeriod();
    ctx.body = { ...(await billingLimits(ctx.state.em, id)), period: { start: period.start.toISOString(), end: period.end.toISOString() } };
  });
  router.put(`${base}/billing-limits`, g.session, async (ctx) => {
    const id = await project(ctx, true);
    const limits = body(ctx, billingLimitsSchema);
    const period = billingPeriod();
    ctx.body = { ...(await setBillingLimits(ctx.state.em, id, limits)), period: { start: period.start.toISOString(), end: period.end.toISOString() } };
  });
  router.get(`${base}/billing-consumption`, g.session, async (ctx) => {
    ctx.body = await billingConsumption(ctx.state.em, await project(ctx, false));
  });

  router.post(`${base}/checkout`, g.session, async (ctx) => {
    const id = await project(ctx, true);
    if (!stripe) throw notEnabled();
    const input = body(ctx, checkoutSchema);
    const price = input.priceId ?? settings.stripe!.priceId;
    if (!price) throw badRequest('No price to subscribe to: pass priceId or set STRIPE_PRICE_ID', 'NO_PRICE');
    const { customer } = await stripeCustomerOf(ctx.state.em, id);
    const session = await stripe.createCheckoutSession({
      price,
      projectId: id,
      customer: customer ?? undefined,
      customerEmail: ctx.state.user!.email,
      successUrl: input.successUrl ?? `${settings.publicUrl}/?checkout=success`,
      cancelUrl: input.cancelUrl ?? `${settings.publicUrl}/?checkout=cancelled`,
    });
    ctx.status = 201;
    ctx.body = { id: session.id, url: session.url };
  });
  router.post(`${base}/billing-portal`, g.session, async (ctx) => {
    const id = await project(ctx, true);
    if (!stripe) throw notEnabled();
    const input = body(ctx, billingPortalSchema);
    const { customer } = await stripeCustomerOf(ctx.state.em, id);
    if (!customer) throw conflict('The project has no billing account yet; complete a checkout first', 'NO_BILLING_ACCOUNT');
    const session = await stripe.createPortalSession(customer, input.returnUrl ?? settings.publicUrl);
    ctx.status = 201;
    ctx.body = { url: session.url };
  });
  router.get(`${base}/billing-invoices`, g.session, async (ctx) => {
    const id = await project(ctx, false);
    if (!stripe) throw notEnabled();
    const { customer, subscriptionStatus } = await stripeCustomerOf(ctx.state.em, id);
    if (!customer) {
      ctx.body = { data: [], subscriptionStatus };
      return;
    }
    const invoices = await stripe.listInvoices(customer, 24);
    const iso = (s?: number) => (s ? new Date(s * 1000).toISOString() : null);
    ctx.body = {
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
  });

  // Stripe's calls: the signature over the exact raw body is the only authentication.
  router.post('/webhooks/incoming/stripe', async (ctx) => {
    const secret = settings.stripe?.webhookSecret;
    if (!secret) throw badRequest('Billing webhooks are not enabled on this deployment', 'BILLING_NOT_ENABLED', { suggestion: 'Set STRIPE_WEBHOOK_SECRET' });
    const raw = await rawBody(ctx);
    if (!verifyStripeSignature(ctx.get('stripe-signature') || undefined, raw, secret)) {
      throw badRequest('Stripe signature verification failed', 'INVALID_SIGNATURE');
    }
    let event: StripeEvent;
    try {
      event = JSON.parse(raw) as StripeEvent;
    } catch {
      throw badRequest('Body is not JSON', 'INVALID_JSON');
    }
    if (typeof event?.id !== 'string' || typeof event.type !== 'string') throw badRequest('Body is not a Stripe event', 'INVALID_EVENT');
    ctx.body = { received: true, result: await applyStripeEvent(ctx.state.em, event) };
  });
}
