/** The dev-mailbox module's public surface: the only file other modules import. */
export { DevMailboxMessageSchema } from './dev-mailbox.entity';
export { storeCaptured } from './dev-mailbox.service';
export { devMailboxRoutes } from './dev-mailbox.routes';
