import type Router from '@koa/router';
import type { RouterContext } from '@koa/router';
import type { Context } from 'koa';
import { endpoint } from '../../http/endpoint';
import { AppError, badRequest } from '../../errors';
import type { Guards } from '../../http/guards';
import { uuidPath } from '../../validation';
import { membership, requireRole } from '../accounts';
import { billingLimitsSchema, billingPortalSchema, checkoutSchema } from './billing.schemas';
import { billingConsumption, billingLimits, billingPeriod, setBillingLimits } from './billing.service';
import { type BillingSettings, Payments } from './payments.service';
import { applyStripeEvent, type StripeEvent } from './stripe-events';
import { verifyStripeSignature } from './stripe';

const WEBHOOK_MAX_BYTES = 1024 * 1024;

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
  const payments = new Payments(settings);
  const project = async (ctx: RouterContext, id: string, manage: boolean) => {
    const role = await membership(ctx.state.em, ctx.state.user!.id, id);
    if (manage) requireRole(role, ['OWNER', 'ADMIN'], 'manage billing');
    return id;
  };
  const base = '/users/@me/projects/:id';
  const tag = 'Billing';
  const params = { id: uuidPath };
  const MEMBER = { 404: 'No such project among the caller’s' };
  const MANAGER = { ...MEMBER, 403: 'The caller is not OWNER or ADMIN (INSUFFICIENT_ROLE)' };
  const STRIPE = { 400: 'Billing is not enabled (BILLING_NOT_ENABLED)', 502: 'Stripe refused or could not be reached' };
  const period = () => {
    const p = billingPeriod();
    return { start: p.start.toISOString(), end: p.end.toISOString() };
  };

  router.get(
    `${base}/billing-limits`,
    g.session,
    endpoint(
      { tag, summary: 'Per-category caps', params, responses: { 200: '`{ emails, contacts, period }` (null: no cap)' }, errors: MEMBER },
      async (ctx, input) => {
        const id = await project(ctx, input.param('id'), false);
        ctx.body = { ...(await billingLimits(ctx.state.em, id)), period: period() };
      },
    ),
  );
  router.put(
    `${base}/billing-limits`,
    g.session,
    endpoint(
      { tag, summary: 'Replace the caps', params, body: billingLimitsSchema, responses: { 200: '`{ emails, contacts, period }`' }, errors: MANAGER },
      async (ctx, input) => {
        const id = await project(ctx, input.param('id'), true);
        ctx.body = { ...(await setBillingLimits(ctx.state.em, id, input.body())), period: period() };
      },
    ),
  );
  router.get(
    `${base}/billing-consumption`,
    g.session,
    endpoint(
      {
        tag,
        summary: 'This period’s consumption against the caps',
        params,
        responses: { 200: '`{ period, emails: { used, limit, remaining, byType }, contacts: { used, limit, remaining } }`' },
        errors: MEMBER,
      },
      async (ctx, input) => {
        ctx.body = await billingConsumption(ctx.state.em, await project(ctx, input.param('id'), false));
      },
    ),
  );

  router.post(
    `${base}/checkout`,
    g.session,
    endpoint(
      {
        tag,
        summary: 'Create a Stripe Checkout subscription session',
        params,
        body: checkoutSchema,
        responses: { 201: '`{ id, url }`' },
        errors: { ...MANAGER, ...STRIPE },
      },
      async (ctx, input) => {
        const id = await project(ctx, input.param('id'), true);
        const payer = { email: ctx.state.user!.email, requestId: ctx.state.requestId };
        ctx.status = 201;
        ctx.body = await payments.checkout(ctx.state.em, id, payer, input.body());
      },
    ),
  );
  router.post(
    `${base}/billing-portal`,
    g.session,
    endpoint(
      {
        tag,
        summary: 'Open the Stripe customer portal',
        params,
        body: billingPortalSchema,
        responses: { 201: '`{ url }`' },
        errors: { ...MANAGER, ...STRIPE, 409: 'No checkout has completed yet (NO_BILLING_ACCOUNT)' },
      },
      async (ctx, input) => {
        const id = await project(ctx, input.param('id'), true);
        ctx.status = 201;
        ctx.body = await payments.portal(ctx.state.em, id, ctx.state.requestId, input.body());
      },
    ),
  );
  router.get(
    `${base}/billing-invoices`,
    g.session,
    endpoint(
      {
        tag,
        summary: 'Invoices of the project',
        params,
        responses: {
          200: '`{ subscriptionStatus, data: [{ id, number, status, currency, total, amountDue, amountPaid, createdAt, periodStart, periodEnd, url, pdf }] }`',
        },
        errors: { ...MEMBER, ...STRIPE },
      },
      async (ctx, input) => {
        ctx.body = await payments.invoices(ctx.state.em, await project(ctx, input.param('id'), false));
      },
    ),
  );

  // Stripe's calls: the signature over the exact raw body is the only authentication.
  router.post(
    '/webhooks/incoming/stripe',
    endpoint(
      {
        tag: 'Webhooks',
        summary: 'Receiver for Stripe billing events (not for client use)',
        description: 'Needs a valid `Stripe-Signature` over the exact raw body (read by the handler itself); each event id is applied once.',
        internal: true,
        responses: { 200: '`{ received: true, result: applied | ignored | duplicate | stale }`' },
        errors: {
          409: 'A subscription event for a customer no checkout has tied to a project yet (UNKNOWN_CUSTOMER): Stripe retries it',
          400: 'Billing webhooks are not enabled, the signature does not hold, or the body is not a Stripe event',
          413: 'Body larger than 1 MB',
        },
      },
      async (ctx) => {
        const secret = settings.stripe?.webhookSecret;
        if (!secret)
          throw badRequest('Billing webhooks are not enabled on this deployment', 'BILLING_NOT_ENABLED', { suggestion: 'Set STRIPE_WEBHOOK_SECRET' });
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
      },
    ),
  );
}
