/** The billing module's public surface: the only file other modules import. */
export { ProcessedStripeEventSchema, ProjectBillingSchema } from './billing.entity';
export { assertWithinBillingLimits, billingPeriod, limitsOf } from './billing.service';
export type { BillingLimits, BillingRow } from './billing.service';
export { billingRoutes } from './billing.routes';
