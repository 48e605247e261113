/** The dev-mailbox module's public surface: the only file other modules import. */
export { devMailboxRoutes } from './dev-mailbox.routes';
export { storeCaptured } from './dev-mailbox.service';
