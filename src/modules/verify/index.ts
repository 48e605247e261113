/** The verify module's public surface: the only file other modules import. */
export { verifyRoutes } from './verify.routes';
