/** The automations module's public surface: the only file other modules import. */
export { WorkflowSchema, WorkflowStepSchema, WorkflowTransitionSchema } from './workflows.entity';
export { WorkflowEntrySchema, WorkflowExecutionSchema, WorkflowExecutionStepSchema, WorkflowWaitSchema } from './executions.entity';
export { AutomationOutboxEntrySchema } from './automation-outbox.entity';
export { AUTOMATION_OUTBOX_CHANNEL, AutomationDispatcher } from './automation-dispatch';
export { AutomationRuntime } from './automation-runtime';
export type { WaitEnd } from './automation-runtime';
export { workflowRoutes } from './automations.routes';
