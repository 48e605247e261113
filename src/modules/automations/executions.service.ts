import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkflowStarter } from '../workflow-starter';
import { newId } from '../../db/ids';
import { holdUntilCommit, transaction } from '../../db/orm';
import { badRequest, notFound } from '../../errors';
import { ContactSchema } from '../contacts';
import { admitEntry, cancelActiveExecutions } from './automations.queries';
import type { ExecutionStatus } from './automations.schemas';
import { definitionOf, graphOf, graphProblems } from './automations.service';
import { AutomationExecution, AutomationExecutionStep, AutomationWait } from './executions.entity';
import { Automation } from './automations.entity';

export const toExecutionDto = (x: AutomationExecution) => ({
  id: x.id,
  workflowId: x.workflowId,
  contactId: x.contactId,
  status: x.status,
  context: x.context,
  currentStepId: x.currentStepId,
  triggerEventId: x.triggerEventId,
  error: x.error,
  createdAt: x.createdAt.toISOString(),
  updatedAt: x.updatedAt.toISOString(),
  completedAt: x.completedAt ? x.completedAt.toISOString() : null,
});

/** One event never starts a workflow twice: its execution id is derived from both. */
export function executionIdFor(workflowId: string, eventId: string): string {
  const h = crypto.createHash('sha1').update(`${workflowId}/${eventId}`).digest();
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

export interface StartOptions {
  contactId: string;
  context: Record<string, unknown>;
  /** Set for executions started by an event: the id is then derived, and re-entry rules apply. */
  triggerEventId?: string;
}

/** Held by the transaction that records an execution until it commits (see holdUntilCommit). */
export const executionCommitKey = (executionId: string) => `execution:${executionId}`;

/**
 * Starts an execution: snapshots the definition, records the execution and starts
 * `automation:<executionId>` before committing (its first activity waits for the commit). An automation without re-entry admits each contact once
 * (workflow_entries). Answers undefined when the contact may not enter.
 * The automation is taken by id and read in the transaction (from the identity map when the caller has loaded it).
 */
export async function startExecution(
  em: EntityManager,
  temporal: WorkflowStarter,
  automation: Pick<Automation, 'id'>,
  opts: StartOptions,
): Promise<AutomationExecution | undefined> {
  return transaction(em, async (tx) => {
    const w = await tx.findOneOrFail(Automation, automation.id);
    const id = opts.triggerEventId ? executionIdFor(w.id, opts.triggerEventId) : newId();
    const existing = await tx.findOne(AutomationExecution, { projectId: w.projectId, id });
    if (existing) return existing;
    if (opts.triggerEventId && !w.allowReentry && !(await admitEntry(tx, w.id, opts.contactId))) return undefined;
    const { steps, transitions } = await graphOf(tx, w.id);
    await holdUntilCommit(tx, executionCommitKey(id));
    const now = new Date();
    const x = tx.create(AutomationExecution, {
      id,
      workflowId: w.id,
      projectId: w.projectId,
      contactId: opts.contactId,
      status: 'RUNNING',
      context: opts.context,
      definition: definitionOf(w, steps, transitions),
      triggerEventId: opts.triggerEventId ?? null,
      createdAt: now,
      updatedAt: now,
    });
    // Recorded before the workflow starts: a refused row starts nothing.
    await tx.persist(x).flush();
    await temporal.startAutomationExecution({ id, projectId: w.projectId, contactId: opts.contactId });
    return x;
  });
}

/** `refresh`: read again, over what this entity manager has loaded before. */
export async function getExecution(em: EntityManager, workflowId: string, id: string, refresh = false): Promise<AutomationExecution> {
  const x = await em.findOne(AutomationExecution, { workflowId, id }, { refresh });
  if (!x) throw notFound('Execution');
  return x;
}

export async function executionSteps(em: EntityManager, executionId: string) {
  const rows = await em.find(AutomationExecutionStep, { executionId }, { orderBy: { startedAt: 'asc', id: 'asc' } });
  return rows.map((r) => ({
    id: r.id,
    stepId: r.stepId,
    type: r.type,
    // Published as a plain string (executionDetailResponse).
    status: r.status as string,
    output: r.output,
    error: r.error,
    startedAt: r.startedAt.toISOString(),
    completedAt: r.completedAt ? r.completedAt.toISOString() : null,
  }));
}

export async function listExecutions(em: EntityManager, workflowId: string, status?: ExecutionStatus, limit = 100, offset = 0) {
  const rows = await em.find(AutomationExecution, { workflowId, ...(status ? { status } : {}) }, { orderBy: { createdAt: 'desc', id: 'desc' }, limit, offset });
  return rows.map(toExecutionDto);
}

/** Cancels running or waiting executions: the record at once, the Temporal workflow by request. */
export async function cancelExecutions(em: EntityManager, temporal: WorkflowStarter, workflowId: string, executionId?: string): Promise<string[]> {
  const ids = await transaction(em, async (tx) => {
    const cancelled = await cancelActiveExecutions(tx, workflowId, executionId);
    if (cancelled.length) await tx.nativeDelete(AutomationWait, { executionId: { $in: cancelled } });
    return cancelled;
  });
  await Promise.all(ids.map((id) => temporal.cancelAutomationExecution(id)));
  return ids;
}

/** `POST /workflows/:id/executions/:executionId/cancel`: one running or waiting execution, answered as it is after. */
export async function cancelExecution(em: EntityManager, temporal: WorkflowStarter, workflowId: string, executionId: string): Promise<AutomationExecution> {
  const x = await getExecution(em, workflowId, executionId);
  if (x.status !== 'RUNNING' && x.status !== 'WAITING') throw badRequest(`A ${x.status} execution cannot be cancelled`, 'EXECUTION_FINISHED');
  await cancelExecutions(em, temporal, workflowId, x.id);
  return getExecution(em, workflowId, x.id, true);
}

/**
 * `POST /workflows/:id/executions`: an execution started by hand for one of the project's contacts,
 * even of a disabled workflow (to try it out), but only of a graph that can run.
 */
export async function startExecutionByHand(
  em: EntityManager,
  temporal: WorkflowStarter,
  w: Automation,
  contactId: string,
  context: Record<string, unknown>,
): Promise<AutomationExecution> {
  if (!(await em.count(ContactSchema, { projectId: w.projectId, id: contactId }))) throw notFound('Contact');
  const { steps, transitions } = await graphOf(em, w.id);
  const problems = graphProblems(steps, transitions);
  if (problems.length) throw badRequest(`This workflow cannot run: ${problems.join('; ')}`, 'WORKFLOW_INVALID', { details: { problems } });
  // Without a trigger event there is no re-entry rule to refuse it: an execution always starts.
  return (await startExecution(em, temporal, w, { contactId, context }))!;
}
