import { type EntityManager, LockMode } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { newId } from '../../db/ids';
import { transaction } from '../../db/orm';
import { AppError, badRequest, conflict, notFound, validationError } from '../../errors';
import { ContactEventSchema } from '../events';
import { ConditionError, type Filter, resolveFilter } from '../segments';
import { TemplateSchema } from '../templates';
import { Topic, unknownTopics } from '../topics';
import { refusePrivateTarget } from '../../net/guarded-http';
import { connectPredecessors, contactDataKeys, executionCounts } from './automations.queries';
import { type StepType, stepConfigSchemas } from './automations.schemas';
import { AutomationExecution } from './executions.entity';
import { Automation, AutomationStep, AutomationTransition } from './automations.entity';

/** A workflow's steps and transitions: what an execution snapshots when it starts. */
export interface Definition {
  workflowId: string;
  name: string;
  steps: Array<{ id: string; type: StepType; name: string; config: Record<string, unknown> }>;
  transitions: Array<{ fromStepId: string; toStepId: string; branch: 'yes' | 'no' | null; outcome: 'event' | 'timeout' | null }>;
}

export const toStepDto = (s: AutomationStep) => ({ id: s.id, type: s.type, name: s.name, config: s.config, position: s.position });
export const toTransitionDto = (t: AutomationTransition) => ({
  id: t.id,
  fromStepId: t.fromStepId,
  toStepId: t.toStepId,
  branch: t.branch,
  outcome: t.outcome,
});

export function toAutomationDto(w: Automation, steps: AutomationStep[], transitions: AutomationTransition[]) {
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    triggerType: w.triggerType,
    triggerConfig: w.triggerConfig,
    enabled: w.enabled,
    allowReentry: w.allowReentry,
    steps: steps.map(toStepDto),
    transitions: transitions.map(toTransitionDto),
    projectId: w.projectId,
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  };
}

/** The project's workflow; `lock` holds its row until the caller's transaction ends. */
export async function getAutomation(em: EntityManager, projectId: string, id: string, lock = false): Promise<Automation> {
  const w = await em.findOne(Automation, { projectId, id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  if (!w) throw notFound('Workflow');
  return w;
}

/** The steps and transitions of the given workflows, each in the order they were made, by workflow id. */
async function graphsOf(em: EntityManager, automationIds: string[]) {
  const order = { orderBy: { createdAt: 'asc', id: 'asc' } } as const;
  const steps = await em.find(AutomationStep, { workflowId: { $in: automationIds } }, order);
  const transitions = await em.find(AutomationTransition, { workflowId: { $in: automationIds } }, order);
  return (workflowId: string) => ({
    steps: steps.filter((s) => s.workflowId === workflowId),
    transitions: transitions.filter((t) => t.workflowId === workflowId),
  });
}

export async function graphOf(em: EntityManager, workflowId: string): Promise<{ steps: AutomationStep[]; transitions: AutomationTransition[] }> {
  return (await graphsOf(em, [workflowId]))(workflowId);
}

export async function automationDto(em: EntityManager, w: Automation) {
  const { steps, transitions } = await graphOf(em, w.id);
  return toAutomationDto(w, steps, transitions);
}

export async function listAutomations(em: EntityManager, projectId: string) {
  const workflows = await em.find(Automation, { projectId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
  if (!workflows.length) return [];
  const ids = workflows.map((w) => w.id);
  const graph = await graphsOf(em, ids);
  const counts = await executionCounts(em, ids);
  return workflows.map((w) => {
    const { steps, transitions } = graph(w.id);
    return { ...toAutomationDto(w, steps, transitions), executions: counts.get(w.id) ?? { active: 0, total: 0 } };
  });
}

/** Creates the workflow with its entry step (TRIGGER): disabled, without re-entry. */
export async function createAutomation(
  em: EntityManager,
  projectId: string,
  input: { name: string; description: string | null; triggerConfig: { eventName: string } },
): Promise<Automation> {
  const now = new Date();
  const w = em.create(Automation, {
    id: newId(),
    projectId,
    name: input.name,
    description: input.description,
    triggerConfig: input.triggerConfig,
    createdAt: now,
    updatedAt: now,
  });
  const trigger = em.create(AutomationStep, { id: newId(), workflowId: w.id, type: 'TRIGGER', name: 'Trigger', config: {} });
  // One flush: both rows or neither.
  await em.persist([w, trigger]).flush();
  return w;
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

/** Validates a step's config for its type; SEND_EMAIL templates and topics must belong to the project. */
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
    if (!(await em.count(TemplateSchema, { projectId, id: value.templateId as string }))) {
      throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
        errors: [{ field: 'config.templateId', message: 'No such template in this project', code: 'invalid_string' }],
      });
    }
    if (value.topicId && !(await em.count(Topic, { projectId, id: value.topicId as string })))
      throw unknownTopics([value.topicId as string], () => 'config.topicId');
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

export async function getStep(em: EntityManager, workflowId: string, stepId: string): Promise<AutomationStep> {
  const s = await em.findOne(AutomationStep, { workflowId, id: stepId });
  if (!s) throw notFound('Step');
  return s;
}

export async function addStep(
  em: EntityManager,
  w: Automation,
  input: { type: StepType; name: string; config?: unknown; position?: Record<string, unknown> | null },
  policy: StepPolicy,
): Promise<AutomationStep> {
  if (input.type === 'TRIGGER') throw badRequest('A workflow has exactly one TRIGGER step, created with it', 'TRIGGER_EXISTS');
  const config = await checkStepConfig(em, w.projectId, input.type, input.config, policy);
  const step = em.create(AutomationStep, { id: newId(), workflowId: w.id, type: input.type, name: input.name, config, position: input.position || null });
  await em.persist(step).flush();
  await touch(em, w);
  return step;
}

export async function updateStep(
  em: EntityManager,
  w: Automation,
  stepId: string,
  patch: { name?: string; config?: unknown; position?: Record<string, unknown> | null },
  policy: StepPolicy,
): Promise<AutomationStep> {
  const step = await getStep(em, w.id, stepId);
  if (patch.config !== undefined) step.config = await checkStepConfig(em, w.projectId, step.type, patch.config, policy);
  if (patch.name !== undefined) step.name = patch.name;
  if (patch.position !== undefined) step.position = patch.position;
  // As the workflow's: even a patch that changes nothing counts as an update.
  step.updatedAt = new Date();
  await em.flush();
  await touch(em, w);
  return step;
}

/**
 * Deletes a step with its transitions. With `splice`, the step's predecessors are connected to its
 * (single) successor, keeping their branch or outcome, so the chain stays whole.
 */
export async function deleteStep(em: EntityManager, w: Automation, stepId: string, splice: boolean): Promise<void> {
  await transaction(em, async (tx) => {
    const step = await getStep(tx, w.id, stepId);
    if (step.type === 'TRIGGER') throw badRequest('The TRIGGER step cannot be deleted', 'TRIGGER_REQUIRED');
    if (splice) {
      const outgoing = await tx.find(AutomationTransition, { workflowId: w.id, fromStepId: stepId });
      if (outgoing.length > 1) throw badRequest('A step with several outgoing transitions cannot be spliced out', 'CANNOT_SPLICE');
      if (outgoing.length === 1) await connectPredecessors(tx, w.id, stepId, outgoing[0].toStepId);
    }
    // Its transitions go with it (ON DELETE CASCADE); em.remove would first null the ones it has loaded.
    await tx.nativeDelete(AutomationStep, { workflowId: w.id, id: step.id });
    await touch(tx, w);
  });
}

export async function addTransition(
  em: EntityManager,
  w: Automation,
  input: { fromStepId: string; toStepId: string; branch?: 'yes' | 'no'; outcome?: 'event' | 'timeout' },
): Promise<AutomationTransition> {
  const from = await getStep(em, w.id, input.fromStepId).catch(() => {
    throw badRequest('fromStepId is not a step of this workflow', 'UNKNOWN_STEP');
  });
  const to = await getStep(em, w.id, input.toStepId).catch(() => {
    throw badRequest('toStepId is not a step of this workflow', 'UNKNOWN_STEP');
  });
  if (input.toStepId === input.fromStepId) throw badRequest('A step cannot lead to itself', 'INVALID_TRANSITION');
  if (to.type === 'TRIGGER') throw badRequest('No transition can lead to the TRIGGER step', 'INVALID_TRANSITION');
  if (from.type === 'CONDITION' && !input.branch) throw badRequest('A transition out of a CONDITION step needs branch yes or no', 'BRANCH_REQUIRED');
  if (from.type !== 'CONDITION' && input.branch) throw badRequest('Only transitions out of a CONDITION step take a branch', 'INVALID_TRANSITION');
  if (from.type === 'WAIT_FOR_EVENT' && !input.outcome)
    throw badRequest('A transition out of a WAIT_FOR_EVENT step needs outcome event or timeout', 'OUTCOME_REQUIRED');
  if (from.type !== 'WAIT_FOR_EVENT' && input.outcome) throw badRequest('Only transitions out of a WAIT_FOR_EVENT step take an outcome', 'INVALID_TRANSITION');
  if (from.type === 'EXIT') throw badRequest('An EXIT step ends the execution; nothing follows it', 'INVALID_TRANSITION');
  const edge = { workflowId: w.id, fromStepId: input.fromStepId, branch: input.branch ?? null, outcome: input.outcome ?? null };
  if (await em.count(AutomationTransition, edge)) throw conflict('That step already has a transition for this branch or outcome', 'TRANSITION_EXISTS');
  const t = em.create(AutomationTransition, { id: newId(), ...edge, toStepId: input.toStepId });
  await em.persist(t).flush();
  await touch(em, w);
  return t;
}

export async function deleteTransition(em: EntityManager, w: Automation, transitionId: string): Promise<void> {
  const deleted = await em.nativeDelete(AutomationTransition, { workflowId: w.id, id: transitionId });
  if (deleted === 0) throw notFound('Transition');
  await touch(em, w);
}

/** A change to a workflow's graph is a change to the workflow. */
async function touch(em: EntityManager, w: Automation): Promise<void> {
  await em.nativeUpdate(Automation, { projectId: w.projectId, id: w.id }, { updatedAt: new Date() });
}

/** Why a graph cannot run, or nothing: checked when a workflow is enabled. */
export function graphProblems(steps: AutomationStep[], transitions: AutomationTransition[]): string[] {
  const problems: string[] = [];
  const triggers = steps.filter((s) => s.type === 'TRIGGER');
  if (triggers.length !== 1) problems.push('the workflow needs exactly one TRIGGER step');
  const ids = new Set(steps.map((s) => s.id));
  for (const t of transitions) {
    if (!ids.has(t.fromStepId) || !ids.has(t.toStepId)) problems.push(`transition ${t.id} leads to or from a step that does not exist`);
  }
  const out = (id: string) => transitions.filter((t) => t.fromStepId === id);
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

export async function updateAutomation(
  em: EntityManager,
  projectId: string,
  id: string,
  patch: { name?: string; description?: string | null; triggerConfig?: { eventName: string }; enabled?: boolean; allowReentry?: boolean },
): Promise<Automation> {
  return transaction(em, async (tx) => {
    const w = await getAutomation(tx, projectId, id, true);
    if (patch.enabled === true) {
      const { steps, transitions } = await graphOf(tx, id);
      const problems = graphProblems(steps, transitions);
      if (problems.length) throw badRequest(`This workflow cannot run: ${problems.join('; ')}`, 'WORKFLOW_INVALID', { details: { problems } });
    }
    if (patch.name !== undefined) w.name = patch.name;
    if (patch.description !== undefined) w.description = patch.description;
    if (patch.triggerConfig !== undefined) w.triggerConfig = patch.triggerConfig;
    if (patch.enabled !== undefined) w.enabled = patch.enabled;
    if (patch.allowReentry !== undefined) w.allowReentry = patch.allowReentry;
    // Even a patch that changes nothing counts as an update.
    w.updatedAt = new Date();
    await tx.flush();
    return w;
  });
}

export async function activeExecutions(em: EntityManager, workflowId: string): Promise<number> {
  return em.count(AutomationExecution, { workflowId, status: { $in: ['RUNNING', 'WAITING'] } });
}

export async function deleteAutomation(em: EntityManager, projectId: string, id: string): Promise<void> {
  const w = await getAutomation(em, projectId, id);
  const active = await activeExecutions(em, id);
  if (active > 0) {
    throw conflict(`The workflow has ${active} active execution(s); cancel them or let them finish first`, 'WORKFLOW_ACTIVE', { details: { active } });
  }
  // Its steps, transitions and executions go with it (ON DELETE CASCADE).
  await em.nativeDelete(Automation, { projectId, id: w.id });
}

export function definitionOf(w: Automation, steps: AutomationStep[], transitions: AutomationTransition[]): Definition {
  return {
    workflowId: w.id,
    name: w.name,
    steps: steps.map((s) => ({ id: s.id, type: s.type, name: s.name, config: s.config })),
    transitions: transitions.map((t) => ({ fromStepId: t.fromStepId, toStepId: t.toStepId, branch: t.branch, outcome: t.outcome })),
  };
}

/** What CONDITION steps can look at: contact fields, the project's data keys and event names, context values. */
export async function conditionFields(em: EntityManager, projectId: string) {
  const dataKeys = await contactDataKeys(em, projectId);
  const events = await em
    .createQueryBuilder(ContactEventSchema)
    .select('name', true)
    .where({ projectId })
    .orderBy({ name: 'asc' })
    .limit(500)
    .execute<Array<{ name: string }>>('all');
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
    data: dataKeys.map((key) => ({ field: `data.${key}`, operators: valueOperators })),
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
