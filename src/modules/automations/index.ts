/** The automations module's public surface: the only file other modules import. */
export { AutomationSchema, AutomationStepSchema, AutomationTransitionSchema } from './automations.entity';
export { AutomationEntrySchema, AutomationExecutionSchema, AutomationExecutionStepSchema, AutomationWaitSchema } from './executions.entity';
export { AutomationOutboxEntrySchema } from './automation-outbox.entity';
export { AUTOMATION_OUTBOX_CHANNEL, AutomationDispatcher } from './automation-dispatch';
export { AutomationRuntime } from './automation-runtime';
export type { WaitEnd } from './automation-runtime';
export { automationRoutes } from './automations.routes';
