import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, optionalTimestampColumn, timestampColumn } from '../../db/entity-columns';
import type { ExecutionStatus } from './automations.schemas';
import type { Definition } from './automations.service';

/** A contact's entry into a workflow without re-entry: there is one however many events race. */
export class AutomationEntry {
  workflowId!: string;
  contactId!: string;
}

/** A contact's run through a workflow, on the definition as it was when the run started. */
export class AutomationExecution {
  [OptionalProps]?: 'context' | 'currentStepId' | 'triggerEventId' | 'error' | 'createdAt' | 'updatedAt' | 'completedAt' | 'resumeAt';
  id!: string;
  workflowId!: string;
  projectId!: string;
  contactId!: string;
  status!: ExecutionStatus;
  context: Record<string, unknown> = {};
  /** The definition as it was when the execution started: edits never reach a running execution. */
  definition!: Definition;
  currentStepId: string | null = null;
  triggerEventId: string | null = null;
  error: string | null = null;
  createdAt!: Date;
  updatedAt!: Date;
  completedAt: Date | null = null;
  /** When a waiting execution resumes: the end of its DELAY or its event's timeout. */
  resumeAt: Date | null = null;
}

/** The record of one step an execution ran: its outcome, output and error. */
export class AutomationExecutionStep {
  [OptionalProps]?: 'output' | 'error' | 'startedAt' | 'completedAt';
  id!: string;
  executionId!: string;
  /** The step of the execution's definition (which its workflow may since have dropped). */
  stepId!: string;
  type!: string;
  status!: 'RUNNING' | 'WAITING' | 'COMPLETED' | 'SKIPPED' | 'FAILED' | 'CANCELLED';
  output: unknown = null;
  error: string | null = null;
  startedAt: Date = new Date();
  completedAt: Date | null = null;
}

/** An execution waiting for an event of its contact, found by (project, contact, event name) when one is recorded. */
export class AutomationWait {
  [OptionalProps]?: 'createdAt';
  executionId!: string;
  projectId!: string;
  contactId!: string;
  eventName!: string;
  createdAt!: Date;
}

export const AutomationEntrySchema = new EntitySchema<AutomationEntry>({
  class: AutomationEntry,
  tableName: 'workflow_entries',
  properties: {
    workflowId: cascadingReference('workflow_entries', 'workflow_id', 'Automation', { primary: true }),
    contactId: cascadingReference('workflow_entries', 'contact_id', 'Contact', { primary: true }),
  },
});

export const AutomationExecutionSchema = new EntitySchema<AutomationExecution>({
  class: AutomationExecution,
  tableName: 'workflow_executions',
  indexes: [
    { name: 'workflow_executions_workflow_idx', properties: ['workflowId', 'createdAt'] },
    {
      name: 'workflow_executions_active_idx',
      expression:
        `CREATE INDEX workflow_executions_active_idx ON public.workflow_executions USING btree (workflow_id) ` +
        `WHERE (status = ANY (ARRAY['RUNNING'::text, 'WAITING'::text]))`,
    },
    { name: 'workflow_executions_contact_idx', properties: ['workflowId', 'contactId'] },
    {
      name: 'workflow_executions_project_waiting_idx',
      expression:
        `CREATE INDEX workflow_executions_project_waiting_idx ON public.workflow_executions USING btree (project_id, resume_at) ` +
        `WHERE (status = 'WAITING'::text)`,
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    workflowId: cascadingReference('workflow_executions', 'workflow_id', 'Automation'),
    projectId: cascadingReference('workflow_executions', 'project_id', 'Project'),
    contactId: cascadingReference('workflow_executions', 'contact_id', 'Contact'),
    status: { enum: true, items: ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'], type: 'text' },
    context: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    definition: { type: 'json', columnType: 'jsonb' },
    currentStepId: { type: 'uuid', nullable: true },
    triggerEventId: { type: 'uuid', nullable: true },
    error: { type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
    completedAt: { ...optionalTimestampColumn },
    resumeAt: { ...optionalTimestampColumn },
  },
});

export const AutomationExecutionStepSchema = new EntitySchema<AutomationExecutionStep>({
  class: AutomationExecutionStep,
  tableName: 'workflow_execution_steps',
  indexes: [{ name: 'workflow_execution_steps_execution_idx', properties: ['executionId', 'startedAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    executionId: cascadingReference('workflow_execution_steps', 'execution_id', 'AutomationExecution'),
    stepId: { type: 'uuid' },
    type: { type: 'text' },
    status: { enum: true, items: ['RUNNING', 'WAITING', 'COMPLETED', 'SKIPPED', 'FAILED', 'CANCELLED'], type: 'text' },
    output: { type: 'json', columnType: 'jsonb', nullable: true },
    error: { type: 'text', nullable: true },
    startedAt: { ...timestampColumn },
    completedAt: { ...optionalTimestampColumn },
  },
});

export const AutomationWaitSchema = new EntitySchema<AutomationWait>({
  class: AutomationWait,
  tableName: 'workflow_waits',
  indexes: [{ name: 'workflow_waits_lookup_idx', properties: ['projectId', 'contactId', 'eventName'] }],
  properties: {
    executionId: cascadingReference('workflow_waits', 'execution_id', 'AutomationExecution', { primary: true }),
    // The execution's, without foreign keys: the events trigger looks waits up by them.
    projectId: { type: 'uuid' },
    contactId: { type: 'uuid' },
    eventName: { type: 'text' },
    createdAt: { ...timestampColumn },
  },
});
