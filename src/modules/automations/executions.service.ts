import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes, workflowIds } from '../../../temporal/workflow-ids';
import { automationWorkflow } from '../../../temporal/workflows/automation';
import { newId } from '../../db/ids';
import { holdUntilCommit, sql, transaction } from '../../db/orm';
import { badRequest, notFound } from '../../http/errors';
import type { ExecutionStatus } from './automations.schemas';
import { type Definition, definitionOf, graphOf, graphProblems, type WorkflowRow } from './automations.service';

export interface ExecutionRow {
  id: string;
  workflow_id: string;
  project_id: string;
  contact_id: string;
  status: ExecutionStatus;
  context: Record<string, unknown>;
  definition: Definition;
  current_step_id: string | null;
  trigger_event_id: string | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

export const toExecutionDto = (x: ExecutionRow) => ({
  id: x.id,
  workflowId: x.workflow_id,
  contactId: x.contact_id,
  status: x.status,
  context: x.context,
  currentStepId: x.current_step_id,
  triggerEventId: x.trigger_event_id,
  error: x.error,
  createdAt: new Date(x.created_at).toISOString(),
  updatedAt: new Date(x.updated_at).toISOString(),
  completedAt: x.completed_at ? new Date(x.completed_at).toISOString() : null,
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
 * `automation:<executionId>` before committing (its first activity waits for the commit). A workflow without re-entry admits each contact once
 * (workflow_entries). Answers undefined when the contact may not enter.
 */
export async function startExecution(em: EntityManager, temporal: TemporalClient, w: WorkflowRow, opts: StartOptions): Promise<ExecutionRow | undefined> {
  const id = opts.triggerEventId ? executionIdFor(w.id, opts.triggerEventId) : newId();
  return transaction(em, async (tx) => {
    const [existing] = await sql<ExecutionRow>(tx, `SELECT * FROM workflow_executions WHERE id = ?`, [id]);
    if (existing) return existing;
    if (opts.triggerEventId && !w.allow_reentry) {
      const admitted = await sql(tx, `INSERT INTO workflow_entries (workflow_id, contact_id) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1`, [
        w.id,
        opts.contactId,
      ]);
      if (admitted.length === 0) return undefined;
    }
    const { steps, transitions } = await graphOf(tx, w.id);
    await holdUntilCommit(tx, executionCommitKey(id));
    const [row] = await sql<ExecutionRow>(
      tx,
      `INSERT INTO workflow_executions (id, workflow_id, project_id, contact_id, status, context, definition, trigger_event_id)
       VALUES (?, ?, ?, ?, 'RUNNING', ?::jsonb, ?::jsonb, ?) RETURNING *`,
      [id, w.id, w.project_id, opts.contactId, JSON.stringify(opts.context), JSON.stringify(definitionOf(w, steps, transitions)), opts.triggerEventId ?? null],
    );
    await temporal.client.workflow.start(automationWorkflow, {
      workflowId: workflowIds.automation(id),
      taskQueue: temporal.taskQueue,
      args: [{ executionId: id }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      typedSearchAttributes: [
        { key: searchAttributes.ProjectId, value: w.project_id },
        { key: searchAttributes.ExecutionId, value: id },
        { key: searchAttributes.ContactId, value: opts.contactId },
      ],
    });
    return row;
  });
}

export async function getExecution(em: EntityManager, workflowId: string, id: string): Promise<ExecutionRow> {
  const [x] = await sql<ExecutionRow>(em, `SELECT * FROM workflow_executions WHERE workflow_id = ? AND id = ?`, [workflowId, id]);
  if (!x) throw notFound('Execution');
  return x;
}

export async function executionSteps(em: EntityManager, executionId: string) {
  const rows = await sql<{
    id: string;
    step_id: string;
    type: string;
    status: string;
    output: unknown;
    error: string | null;
    started_at: Date;
    completed_at: Date | null;
  }>(em, `SELECT * FROM workflow_execution_steps WHERE execution_id = ? ORDER BY started_at, id`, [executionId]);
  return rows.map((r) => ({
    id: r.id,
    stepId: r.step_id,
    type: r.type,
    status: r.status,
    output: r.output,
    error: r.error,
    startedAt: new Date(r.started_at).toISOString(),
    completedAt: r.completed_at ? new Date(r.completed_at).toISOString() : null,
  }));
}

export async function listExecutions(em: EntityManager, workflowId: string, status?: ExecutionStatus, limit = 100, offset = 0) {
  const rows = await sql<ExecutionRow>(
    em,
    `SELECT * FROM workflow_executions WHERE workflow_id = ? ${status ? 'AND status = ?' : ''} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    [workflowId, ...(status ? [status] : []), limit, offset],
  );
  return rows.map(toExecutionDto);
}

/** Cancels running or waiting executions: the record at once, the Temporal workflow by request. */
export async function cancelExecutions(em: EntityManager, temporal: TemporalClient, workflowId: string, executionId?: string): Promise<string[]> {
  const ids = await transaction(em, async (tx) => {
    const rows = await sql<{ id: string }>(
      tx,
      `UPDATE workflow_executions SET status = 'CANCELLED', completed_at = now(), updated_at = now()
       WHERE workflow_id = ? ${executionId ? 'AND id = ?' : ''} AND status IN ('RUNNING', 'WAITING') RETURNING id`,
      [workflowId, ...(executionId ? [executionId] : [])],
    );
    await sql(tx, `DELETE FROM workflow_waits WHERE execution_id = ANY(?::uuid[])`, [rows.map((r) => r.id)]);
    return rows.map((r) => r.id);
  });
  await Promise.all(
    ids.map((id) =>
      temporal.client.workflow
        .getHandle(workflowIds.automation(id))
        .cancel()
        .catch(() => {}),
    ),
  );
  return ids;
}

/**
 * `POST /workflows/:id/executions`: an execution started by hand for one of the project's contacts,
 * even of a disabled workflow (to try it out), but only of a graph that can run.
 */
export async function startExecutionByHand(
  em: EntityManager,
  temporal: TemporalClient,
  w: WorkflowRow,
  contactId: string,
  context: Record<string, unknown>,
): Promise<ExecutionRow> {
  const [contact] = await sql(em, `SELECT 1 FROM contacts WHERE project_id = ? AND id = ?`, [w.project_id, contactId]);
  if (!contact) throw notFound('Contact');
  const { steps, transitions } = await graphOf(em, w.id);
  const problems = graphProblems(steps, transitions);
  if (problems.length) throw badRequest(`This workflow cannot run: ${problems.join('; ')}`, 'WORKFLOW_INVALID', { details: { problems } });
  // Without a trigger event there is no re-entry rule to refuse it: an execution always starts.
  return (await startExecution(em, temporal, w, { contactId, context }))!;
}
