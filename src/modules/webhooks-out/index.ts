/** The webhooks-out module's public surface: the only file other modules import. */
export { WebhookEndpointSchema } from './webhook-endpoints.entity';
export { WebhookDeliverySchema } from './webhook-deliveries.entity';
export { WebhookDispatcher } from './webhook-dispatch';
export { purgeWebhookDeliveries } from './webhook-endpoints.service';
export { WEBHOOK_DELIVERIES_CHANNEL } from './webhooks-out.queries';
export { webhookEndpointRoutes } from './webhook-endpoints.routes';
