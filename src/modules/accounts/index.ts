/** The accounts module's public surface: the only file other modules import. */
export { accountEntities } from './accounts.entity';
export { sendAccountEmail } from './account-emails';
export type { AccountEmail } from './account-emails';
export type { Role } from './accounts.entity';
export { accountRoutes } from './accounts.routes';
export { membership, requireRole } from './accounts.service';
export { ProjectKeyCache } from './project-keys';
export { projectSettings, trackingOverrideSchema, withDefaults } from './project-settings';
export type { ProjectSettings, TrackingOverride } from './project-settings';
