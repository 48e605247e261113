/** The security module's public surface: the only file other modules import. */
export { securityRoutes } from './security.routes';
export { SendingJudge, reinstateProject } from './security.service';
