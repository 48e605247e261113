/** The accounts module's public surface: the only file other modules import. */
export { accountEntities } from './accounts.entity';
export { Project } from './accounts.entity';
export type { Role } from './accounts.entity';
export { projectSettings, trackingOverrideSchema, withDefaults } from './project-settings';
export type { ProjectSettings, TrackingOverride } from './project-settings';
export { sendAccountEmail } from './account-emails';
export type { AccountEmail } from './account-emails';
export { ProjectKeyCache } from './project-keys';
export { membership, requireRole, sessionUser } from './accounts.service';
export { accountRoutes } from './accounts.routes';
