import { EntitySchema, OptionalProps } from '@mikro-orm/core';
import { cascadingReference, timestampColumn } from '../../db/entity-columns';
import type { StepType } from './automations.schemas';

/**
 * An automation of a project (a "workflow" in the API, whose table it keeps): the event that starts it,
 * whether it is on, and whether a contact may re-enter.
 */
export class Automation {
  [OptionalProps]?: 'description' | 'triggerType' | 'enabled' | 'allowReentry' | 'createdAt' | 'updatedAt';
  id!: string;
  projectId!: string;
  name!: string;
  description: string | null = null;
  triggerType = 'EVENT' as const;
  triggerConfig!: { eventName: string };
  enabled = false;
  allowReentry = false;
  createdAt!: Date;
  updatedAt!: Date;
}

/** A step of an automation's definition: its type, its configuration and where the editor draws it. */
export class AutomationStep {
  [OptionalProps]?: 'config' | 'position' | 'createdAt' | 'updatedAt';
  id!: string;
  workflowId!: string;
  type!: StepType;
  name!: string;
  config: Record<string, unknown> = {};
  position: Record<string, unknown> | null = null;
  createdAt!: Date;
  updatedAt!: Date;
}

/** An edge of an automation's definition: from one step to the next, on a condition's branch or a wait's outcome. */
export class AutomationTransition {
  [OptionalProps]?: 'branch' | 'outcome' | 'createdAt';
  id!: string;
  workflowId!: string;
  fromStepId!: string;
  toStepId!: string;
  branch: 'yes' | 'no' | null = null;
  outcome: 'event' | 'timeout' | null = null;
  createdAt!: Date;
}

export const AutomationSchema = new EntitySchema<Automation>({
  class: Automation,
  tableName: 'workflows',
  indexes: [
    { name: 'workflows_project_idx', properties: ['projectId', 'createdAt'] },
    // Which enabled workflows an event starts: looked up for every recorded event.
    {
      name: 'workflows_trigger_idx',
      expression: `CREATE INDEX workflows_trigger_idx ON public.workflows USING btree (project_id, ((trigger_config ->> 'eventName'::text))) WHERE enabled`,
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    projectId: cascadingReference('workflows', 'project_id', 'Project'),
    name: { type: 'text' },
    description: { type: 'text', nullable: true },
    triggerType: { enum: true, items: ['EVENT'], type: 'text', default: 'EVENT' },
    triggerConfig: { type: 'json', columnType: 'jsonb' },
    enabled: { type: 'boolean', default: false },
    allowReentry: { type: 'boolean', default: false },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const AutomationStepSchema = new EntitySchema<AutomationStep>({
  class: AutomationStep,
  tableName: 'workflow_steps',
  indexes: [
    { name: 'workflow_steps_workflow_idx', properties: ['workflowId', 'createdAt'] },
    // Which workflow steps send a template: its usage, asked for before it is deleted.
    {
      name: 'workflow_steps_template_idx',
      expression:
        `CREATE INDEX workflow_steps_template_idx ON public.workflow_steps USING btree (((config ->> 'templateId'::text))) ` +
        `WHERE (type = 'SEND_EMAIL'::text)`,
    },
  ],
  properties: {
    id: { type: 'uuid', primary: true },
    workflowId: cascadingReference('workflow_steps', 'workflow_id', 'Automation'),
    type: {
      enum: true,
      items: ['TRIGGER', 'SEND_EMAIL', 'DELAY', 'WAIT_FOR_EVENT', 'CONDITION', 'WEBHOOK', 'UPDATE_CONTACT', 'EXIT'],
      type: 'text',
    },
    name: { type: 'text' },
    config: { type: 'json', columnType: 'jsonb', defaultRaw: `'{}'::jsonb` },
    position: { type: 'json', columnType: 'jsonb', nullable: true },
    createdAt: { ...timestampColumn },
    updatedAt: { ...timestampColumn, onUpdate: () => new Date() },
  },
});

export const AutomationTransitionSchema = new EntitySchema<AutomationTransition>({
  class: AutomationTransition,
  tableName: 'workflow_transitions',
  indexes: [{ name: 'workflow_transitions_workflow_idx', properties: ['workflowId'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    workflowId: cascadingReference('workflow_transitions', 'workflow_id', 'Automation'),
    fromStepId: cascadingReference('workflow_transitions', 'from_step_id', 'AutomationStep'),
    toStepId: cascadingReference('workflow_transitions', 'to_step_id', 'AutomationStep'),
    branch: { enum: true, items: ['yes', 'no'], type: 'text', nullable: true },
    outcome: { enum: true, items: ['event', 'timeout'], type: 'text', nullable: true },
    createdAt: { ...timestampColumn },
  },
});
