/** The webhooks-out module's public surface: the only file other modules import. */
export { WebhookEndpointSchema } from './webhook-endpoints.entity';
export { WebhookDeliverySchema } from './webhook-deliveries.entity';
export { WebhookDispatcher } from './webhook-dispatch';
export { WEBHOOK_DELIVERIES_CHANNEL, purgeWebhookDeliveries } from './webhook-endpoints.service';
export { webhookEndpointRoutes } from './webhook-endpoints.routes';
