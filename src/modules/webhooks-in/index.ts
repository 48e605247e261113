/** The webhooks-in module's public surface: the only file other modules import. */
export { SnsNotificationSchema } from './sns-notifications.entity';
export { SnsVerifier } from './sns-signature';
export { snsRoutes } from './sns.routes';
