/** The automations module's public surface: the only file other modules import. */
export { AUTOMATION_OUTBOX_CHANNEL, AutomationDispatcher } from './automation-dispatch';
export { AutomationRuntime } from './automation-runtime';
export type { WaitEnd } from './automation-runtime';
export { workflowRoutes } from './automations.routes';
