/** The config module's public surface: the only file other modules import. */
export { configRoutes } from './config.routes';
