/** The consent module's public surface: double opt-in confirmations, the preference center, the subscribe form. */
export { ConsentConfirmationSchema } from './consent.entity';
export { expirePendingTopics } from './consent.queries';
export { requestConfirmation } from './consent.service';
export type { ConsentDeps, RequestOrigin } from './consent.service';
export { consentRoutes } from './consent.routes';
