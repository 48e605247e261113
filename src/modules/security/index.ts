/** The security module's public surface: the only file other modules import. */
export { ProjectSuspensionSchema } from './security.entity';
export { SendingJudge, reinstateProject } from './security.service';
export { securityRoutes } from './security.routes';
