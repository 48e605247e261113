import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { newId } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { AppError, badRequest, conflict, notFound, validationError } from '../../http/errors';
import { ConditionError, type Filter, resolveFilter } from '../segments';
import { refusePrivateTarget } from '../../net/guarded-http';
import { type StepType, stepConfigSchemas } from './automations.schemas';

export interface WorkflowRow {
  id: string;
  project_id: string;
  name: string;
  description: string | null;
  trigger_type: 'EVENT';
  trigger_config: { eventName: string };
  enabled: boolean;
  allow_reentry: boolean;
  created_at: Date;
  updated_at: Date;
}

export interface StepRow {
  id: string;
  workflow_id: string;
  type: StepType;
  name: string;
  config: Record<string, unknown>;
  position: Record<string, unknown> | null;
}

export interface TransitionRow {
  id: string;
  workflow_id: string;
  from_step_id: string;
  to_step_id: string;
  branch: 'yes' | 'no' | null;
  outcome: 'event' | 'timeout' | null;
}

/** A workflow's steps and transitions: what an execution snapshots when it starts. */
export interface Definition {
  workflowId: string;
  name: string;
  steps: Array<{ id: string; type: StepType; name: string; config: Record<string, unknown> }>;
  transitions: Array<{ fromStepId: string; toStepId: string; branch: 'yes' | 'no' | null; outcome: 'event' | 'timeout' | null }>;
}

export const toStepDto = (s: StepRow) => ({ id: s.id, type: s.type, name: s.name, config: s.config, position: s.position });
export const toTransitionDto = (t: TransitionRow) => ({
  id: t.id,
  fromStepId: t.from_step_id,
  toStepId: t.to_step_id,
  branch: t.branch,
  outcome: t.outcome,
});

export function toWorkflowDto(w: WorkflowRow, steps: StepRow[], transitions: TransitionRow[]) {
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    triggerType: w.trigger_type,
    triggerConfig: w.trigger_config,
    enabled: w.enabled,
    allowReentry: w.allow_reentry,
    steps: steps.map(toStepDto),
    transitions: transitions.map(toTransitionDto),
    projectId: w.project_id,
    createdAt: new Date(w.created_at).toISOString(),
    updatedAt: new Date(w.updated_at).toISOString(),
  };
}

export async function getWorkflow(em: EntityManager, projectId: string, id: string, lock = false): Promise<WorkflowRow> {
  const [w] = await sql<WorkflowRow>(em, `SELECT * FROM workflows WHERE project_id = ? AND id = ?${lock ? ' FOR UPDATE' : ''}`, [projectId, id]);
  if (!w) throw notFound('Workflow');
  return w;
}

export async function graphOf(em: EntityManager, workflowId: string): Promise<{ steps: StepRow[]; transitions: TransitionRow[] }> {
  const steps = await sql<StepRow>(em, `SELECT * FROM workflow_steps WHERE workflow_id = ? ORDER BY created_at, id`, [workflowId]);
  const transitions = await sql<TransitionRow>(em, `SELECT * FROM workflow_transitions WHERE workflow_id = ? ORDER BY created_at, id`, [workflowId]);
  return { steps, transitions };
}

export async function workflowDto(em: EntityManager, w: WorkflowRow) {
  const { steps, transitions } = await graphOf(em, w.id);
  return toWorkflowDto(w, steps, transitions);
}

export async function listWorkflows(em: EntityManager, projectId: string) {
  const rows = await sql<WorkflowRow & { active: number; total: number }>(
    em,
    `SELECT w.*,
            (SELECT count(*)::int FROM workflow_executions x WHERE x.workflow_id = w.id AND x.status IN ('RUNNING', 'WAITING')) AS active,
            (SELECT count(*)::int FROM workflow_executions x WHERE x.workflow_id = w.id) AS total
       FROM workflows w WHERE w.project_id = ? ORDER BY w.created_at, w.id`,
    [projectId],
  );
  return Promise.all(rows.map(async (w) => ({ ...(await workflowDto(em, w)), executions: { active: w.active, total: w.total } })));
}

/** Creates the workflow with its entry step (TRIGGER): disabled, without re-entry. */
export async function createWorkflow(
  em: EntityManager,
  projectId: string,
  input: { name: string; description: string | null; triggerConfig: { eventName: string } },
) {
  return transaction(em, async (tx) => {
    const [w] = await sql<WorkflowRow>(
      tx,
      `INSERT INTO workflows (id, project_id, name, description, trigger_config) VALUES (?, ?, ?, ?, ?::jsonb) RETURNING *`,
      [newId(), projectId, input.name, input.description, JSON.stringify(input.triggerConfig)],
    );
    await sql(tx, `INSERT INTO workflow_steps (id, workflow_id, type, name, config) VALUES (?, ?, 'TRIGGER', 'Trigger', '{}'::jsonb)`, [newId(), w.id]);
    return w;
  });
}

/** A CONDITION step's filter in the condition engine's terms, and what it is evaluated against. */
export function conditionFilter(config: Record<string, unknown>): { filter: Filter; scope: 'contact' | 'context' } {
  const field = String(config.field);
  const base = { operator: String(config.operator), value: config.value, unit: config.unit as string | undefined };
  if (field === 'contact.email') return { filter: { ...base, field: 'email' }, scope: 'contact' };
  if (field === 'contact.subscribed') return { filter: { ...base, field: 'subscribed' }, scope: 'contact' };
  if (field.startsWith('workflow.')) return { filter: { ...base, field: `data.${field.slice(9)}` }, scope: 'context' };
  return { filter: { ...base, field }, scope: 'contact' };
}

function configError(issues: readonly z.core.$ZodIssue[]): AppError {
  return validationError(issues.map((i) => ({ ...i, path: ['config', ...i.path] })));
}

/** Where a WEBHOOK step may call: private addresses only with WEBHOOK_ALLOW_PRIVATE. */
export interface StepPolicy {
  allowPrivateWebhooks: boolean;
}

/** Validates a step's config for its type; SEND_EMAIL templates must belong to the project. */
export async function checkStepConfig(
  em: EntityManager,
  projectId: string,
  type: StepType,
  config: unknown,
  policy: StepPolicy,
): Promise<Record<string, unknown>> {
  const parsed = stepConfigSchemas[type].safeParse(config ?? {}, { reportInput: true });
  if (!parsed.success) throw configError(parsed.error.issues);
  const value = parsed.data as Record<string, unknown>;
  if (type === 'WEBHOOK') refusePrivateTarget(value.url as string, 'config.url', policy.allowPrivateWebhooks);
  if (type === 'SEND_EMAIL') {
    const [t] = await sql(em, `SELECT 1 FROM templates WHERE project_id = ? AND id = ?`, [projectId, value.templateId]);
    if (!t) {
      throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
        errors: [{ field: 'config.templateId', message: 'No such template in this project', code: 'invalid_string' }],
      });
    }
  }
  if (type === 'CONDITION') {
    try {
      resolveFilter(conditionFilter(value).filter, 'config', Date.now());
    } catch (err) {
      if (!(err instanceof ConditionError)) throw err;
      throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
        errors: [{ field: 'config', message: err.message.replace(/^config: /, ''), code: 'invalid_string' }],
      });
    }
  }
  return value;
}

export async function getStep(em: EntityManager, workflowId: string, stepId: string): Promise<StepRow> {
  const [s] = await sql<StepRow>(em, `SELECT * FROM workflow_steps WHERE workflow_id = ? AND id = ?`, [workflowId, stepId]);
  if (!s) throw notFound('Step');
  return s;
}

export async function addStep(
  em: EntityManager,
  w: WorkflowRow,
  input: { type: StepType; name: string; config?: unknown; position?: Record<string, unknown> | null },
  policy: StepPolicy,
): Promise<StepRow> {
  if (input.type === 'TRIGGER') throw badRequest('A workflow has exactly one TRIGGER step, created with it', 'TRIGGER_EXISTS');
  const config = await checkStepConfig(em, w.project_id, input.type, input.config, policy);
  const [s] = await sql<StepRow>(
    em,
    `INSERT INTO workflow_steps (id, workflow_id, type, name, config, position) VALUES (?, ?, ?, ?, ?::jsonb, ?::jsonb) RETURNING *`,
    [newId(), w.id, input.type, input.name, JSON.stringify(config), input.position ? JSON.stringify(input.position) : null],
  );
  await touch(em, w.id);
  return s;
}

export async function updateStep(
  em: EntityManager,
  w: WorkflowRow,
  stepId: string,
  patch: { name?: string; config?: unknown; position?: Record<string, unknown> | null },
  policy: StepPolicy,
): Promise<StepRow> {
  const step = await getStep(em, w.id, stepId);
  const config = patch.config !== undefined ? await checkStepConfig(em, w.project_id, step.type, patch.config, policy) : step.config;
  const [s] = await sql<StepRow>(
    em,
    `UPDATE workflow_steps SET name = ?, config = ?::jsonb, position = ?::jsonb, updated_at = now() WHERE id = ? RETURNING *`,
    [patch.name ?? step.name, JSON.stringify(config), patch.position !== undefined ? JSON.stringify(patch.position) : JSON.stringify(step.position), stepId],
  );
  await touch(em, w.id);
  return s;
}

/**
 * Deletes a step with its transitions. With `splice`, the step's predecessors are connected to its
 * (single) successor, keeping their branch or outcome, so the chain stays whole.
 */
export async function deleteStep(em: EntityManager, w: WorkflowRow, stepId: string, splice: boolean): Promise<void> {
  await transaction(em, async (tx) => {
    const step = await getStep(tx, w.id, stepId);
    if (step.type === 'TRIGGER') throw badRequest('The TRIGGER step cannot be deleted', 'TRIGGER_REQUIRED');
    if (splice) {
      const outgoing = await sql<TransitionRow>(tx, `SELECT * FROM workflow_transitions WHERE from_step_id = ?`, [stepId]);
      if (outgoing.length > 1) throw badRequest('A step with several outgoing transitions cannot be spliced out', 'CANNOT_SPLICE');
      if (outgoing.length === 1) {
        await sql(
          tx,
          `INSERT INTO workflow_transitions (id, workflow_id, from_step_id, to_step_id, branch, outcome)
           SELECT gen_random_uuid(), workflow_id, from_step_id, ?, branch, outcome FROM workflow_transitions
           WHERE to_step_id = ? AND from_step_id <> ?`,
          [outgoing[0].to_step_id, stepId, outgoing[0].to_step_id],
        );
      }
    }
    await sql(tx, `DELETE FROM workflow_steps WHERE id = ?`, [stepId]);
    await touch(tx, w.id);
  });
}

export async function addTransition(
  em: EntityManager,
  w: WorkflowRow,
  input: { fromStepId: string; toStepId: string; branch?: 'yes' | 'no'; outcome?: 'event' | 'timeout' },
): Promise<TransitionRow> {
  const from = await getStep(em, w.id, input.fromStepId).catch(() => {
    throw badRequest('fromStepId is not a step of this workflow', 'UNKNOWN_STEP');
  });
  await getStep(em, w.id, input.toStepId).catch(() => {
    throw badRequest('toStepId is not a step of this workflow', 'UNKNOWN_STEP');
  });
  if (input.toStepId === input.fromStepId) throw badRequest('A step cannot lead to itself', 'INVALID_TRANSITION');
  const toTrigger = await sql(em, `SELECT 1 FROM workflow_steps WHERE id = ? AND type = 'TRIGGER'`, [input.toStepId]);
  if (toTrigger.length) throw badRequest('No transition can lead to the TRIGGER step', 'INVALID_TRANSITION');
  if (from.type === 'CONDITION' && !input.branch) throw badRequest('A transition out of a CONDITION step needs branch yes or no', 'BRANCH_REQUIRED');
  if (from.type !== 'CONDITION' && input.branch) throw badRequest('Only transitions out of a CONDITION step take a branch', 'INVALID_TRANSITION');
  if (from.type === 'WAIT_FOR_EVENT' && !input.outcome)
    throw badRequest('A transition out of a WAIT_FOR_EVENT step needs outcome event or timeout', 'OUTCOME_REQUIRED');
  if (from.type !== 'WAIT_FOR_EVENT' && input.outcome) throw badRequest('Only transitions out of a WAIT_FOR_EVENT step take an outcome', 'INVALID_TRANSITION');
  if (from.type === 'EXIT') throw badRequest('An EXIT step ends the execution; nothing follows it', 'INVALID_TRANSITION');
  const [taken] = await sql(
    em,
    `SELECT 1 FROM workflow_transitions WHERE from_step_id = ? AND branch IS NOT DISTINCT FROM ? AND outcome IS NOT DISTINCT FROM ?`,
    [input.fromStepId, input.branch ?? null, input.outcome ?? null],
  );
  if (taken) throw conflict('That step already has a transition for this branch or outcome', 'TRANSITION_EXISTS');
  const [t] = await sql<TransitionRow>(
    em,
    `INSERT INTO workflow_transitions (id, workflow_id, from_step_id, to_step_id, branch, outcome) VALUES (?, ?, ?, ?, ?, ?) RETURNING *`,
    [newId(), w.id, input.fromStepId, input.toStepId, input.branch ?? null, input.outcome ?? null],
  );
  await touch(em, w.id);
  return t;
}

export async function deleteTransition(em: EntityManager, w: WorkflowRow, transitionId: string): Promise<void> {
  const rows = await sql(em, `DELETE FROM workflow_transitions WHERE workflow_id = ? AND id = ? RETURNING id`, [w.id, transitionId]);
  if (rows.length === 0) throw notFound('Transition');
  await touch(em, w.id);
}

async function touch(em: EntityManager, workflowId: string): Promise<void> {
  await sql(em, `UPDATE workflows SET updated_at = now() WHERE id = ?`, [workflowId]);
}

/** Why a graph cannot run, or nothing: checked when a workflow is enabled. */
export function graphProblems(steps: StepRow[], transitions: TransitionRow[]): string[] {
  const problems: string[] = [];
  const triggers = steps.filter((s) => s.type === 'TRIGGER');
  if (triggers.length !== 1) problems.push('the workflow needs exactly one TRIGGER step');
  const ids = new Set(steps.map((s) => s.id));
  for (const t of transitions) {
    if (!ids.has(t.from_step_id) || !ids.has(t.to_step_id)) problems.push(`transition ${t.id} leads to or from a step that does not exist`);
  }
  const out = (id: string) => transitions.filter((t) => t.from_step_id === id);
  if (triggers[0] && out(triggers[0].id).length === 0) problems.push('the TRIGGER step leads nowhere');
  for (const s of steps) {
    if (s.type === 'CONDITION') {
      for (const branch of ['yes', 'no'] as const) {
        if (!out(s.id).some((t) => t.branch === branch)) problems.push(`CONDITION step "${s.name}" has no "${branch}" branch`);
      }
    }
    if (s.type === 'WAIT_FOR_EVENT') {
      // Without a "timeout" transition the execution simply ends (COMPLETED) when the time is up.
      if (!out(s.id).some((t) => t.outcome === 'event')) problems.push(`WAIT_FOR_EVENT step "${s.name}" has no "event" transition`);
    }
  }
  return problems;
}

export async function updateWorkflow(
  em: EntityManager,
  projectId: string,
  id: string,
  patch: { name?: string; description?: string | null; triggerConfig?: { eventName: string }; enabled?: boolean; allowReentry?: boolean },
): Promise<WorkflowRow> {
  return transaction(em, async (tx) => {
    const w = await getWorkflow(tx, projectId, id, true);
    if (patch.enabled === true) {
      const { steps, transitions } = await graphOf(tx, id);
      const problems = graphProblems(steps, transitions);
      if (problems.length) throw badRequest(`This workflow cannot run: ${problems.join('; ')}`, 'WORKFLOW_INVALID', { details: { problems } });
    }
    const [row] = await sql<WorkflowRow>(
      tx,
      `UPDATE workflows SET name = ?, description = ?, trigger_config = ?::jsonb, enabled = ?, allow_reentry = ?, updated_at = now()
       WHERE id = ? RETURNING *`,
      [
        patch.name ?? w.name,
        patch.description !== undefined ? patch.description : w.description,
        JSON.stringify(patch.triggerConfig ?? w.trigger_config),
        patch.enabled ?? w.enabled,
        patch.allowReentry ?? w.allow_reentry,
        id,
      ],
    );
    return row;
  });
}

export async function activeExecutions(em: EntityManager, workflowId: string): Promise<number> {
  const [{ n }] = await sql<{ n: number }>(
    em,
    `SELECT count(*)::int AS n FROM workflow_executions WHERE workflow_id = ? AND status IN ('RUNNING', 'WAITING')`,
    [workflowId],
  );
  return n;
}

export async function deleteWorkflow(em: EntityManager, projectId: string, id: string): Promise<void> {
  await getWorkflow(em, projectId, id);
  const active = await activeExecutions(em, id);
  if (active > 0) {
    throw conflict(`The workflow has ${active} active execution(s); cancel them or let them finish first`, 'WORKFLOW_ACTIVE', { details: { active } });
  }
  await sql(em, `DELETE FROM workflows WHERE id = ?`, [id]);
}

export function definitionOf(w: WorkflowRow, steps: StepRow[], transitions: TransitionRow[]): Definition {
  return {
    workflowId: w.id,
    name: w.name,
    steps: steps.map((s) => ({ id: s.id, type: s.type, name: s.name, config: s.config })),
    transitions: transitions.map((t) => ({ fromStepId: t.from_step_id, toStepId: t.to_step_id, branch: t.branch, outcome: t.outcome })),
  };
}

/** What CONDITION steps can look at: contact fields, the project's data keys and event names, context values. */
export async function conditionFields(em: EntityManager, projectId: string) {
  const dataKeys = await sql<{ key: string }>(
    em,
    `SELECT DISTINCT k AS key FROM (SELECT jsonb_object_keys(data) AS k FROM contacts WHERE project_id = ? LIMIT 100000) s ORDER BY k LIMIT 500`,
    [projectId],
  );
  const events = await sql<{ name: string }>(em, `SELECT DISTINCT name FROM events WHERE project_id = ? ORDER BY name LIMIT 500`, [projectId]);
  const valueOperators = [
    'equals',
    'notEquals',
    'contains',
    'notContains',
    'greaterThan',
    'lessThan',
    'greaterThanOrEqual',
    'lessThanOrEqual',
    'exists',
    'notExists',
    'within',
    'olderThan',
  ];
  return {
    contact: [
      { field: 'contact.email', type: 'string', operators: ['equals', 'notEquals', 'contains', 'notContains'] },
      { field: 'contact.subscribed', type: 'boolean', operators: ['equals', 'notEquals'] },
    ],
    data: dataKeys.map((k) => ({ field: `data.${k.key}`, operators: valueOperators })),
    events: events.map((e) => ({
      field: `event.${e.name}`,
      operators: ['triggered', 'notTriggered', 'triggeredWithin', 'triggeredOlderThan', 'notTriggeredWithin'],
    })),
    workflow: {
      field: 'workflow.<path>',
      description: 'a value of the execution context (the trigger event, manual context, webhook results)',
      operators: valueOperators,
    },
  };
}
