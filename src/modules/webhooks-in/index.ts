/** The webhooks-in module's public surface: the only file other modules import. */
export { SnsVerifier } from './sns-signature';
export { snsRoutes } from './sns.routes';
