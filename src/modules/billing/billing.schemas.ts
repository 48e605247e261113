import { z } from 'zod';

const cap = z.number().int().min(0).max(1e12).nullable();

/** PUT replaces both caps; a missing or null one is no cap. */
export const billingLimitsSchema = z.object({ emails: cap.default(null), contacts: cap.default(null) }).strict();

const webUrl = z.url({ protocol: /^https?$/, message: 'Expected an http or https URL' });

export const checkoutSchema = z
  .object({
    /** The Stripe price to subscribe to; default STRIPE_PRICE_ID. */
    priceId: z.string().min(1).max(200).optional(),
    successUrl: webUrl.optional(),
    cancelUrl: webUrl.optional(),
  })
  .strict();

export const billingPortalSchema = z.object({ returnUrl: webUrl.optional() }).strict();
