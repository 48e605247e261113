/** The analytics module's public surface: the only file other modules import. */
export { analyticsRoutes } from './analytics.routes';
