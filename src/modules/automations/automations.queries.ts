import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { AutomationOutboxEntry } from './automation-outbox.entity';
import { AutomationExecution } from './executions.entity';

/**
 * The automations module's hand-written SQL: statements that must stay one atomic, set-based
 * statement (claims, conditional status changes, idempotent upserts of several tables) and aggregates.
 * Everything else goes through the EntityManager.
 */

// Aggregate: both counts of every listed workflow in one grouped scan.
export async function executionCounts(em: EntityManager, automationIds: string[]): Promise<Map<string, { active: number; total: number }>> {
  const rows = await sql<{ workflow_id: string; active: number; total: number }>(
    em,
    `SELECT workflow_id, (count(*) FILTER (WHERE status IN ('RUNNING', 'WAITING')))::int AS active, count(*)::int AS total
       FROM workflow_executions WHERE workflow_id = ANY(?::uuid[]) GROUP BY workflow_id`,
    [automationIds],
  );
  return new Map(rows.map((r) => [r.workflow_id, { active: r.active, total: r.total }]));
}

// Set-based: every predecessor of the step gets a transition to its successor, in one INSERT ... SELECT.
export async function connectPredecessors(tx: EntityManager, workflowId: string, stepId: string, toStepId: string): Promise<void> {
  await sql(
    tx,
    `INSERT INTO workflow_transitions (id, workflow_id, from_step_id, to_step_id, branch, outcome)
     SELECT gen_random_uuid(), workflow_id, from_step_id, ?, branch, outcome FROM workflow_transitions
     WHERE workflow_id = ? AND to_step_id = ? AND from_step_id <> ?`,
    [toStepId, workflowId, stepId, toStepId],
  );
}

// Concurrency guard: ON CONFLICT DO NOTHING admits a contact once however many events race.
export async function admitEntry(tx: EntityManager, workflowId: string, contactId: string): Promise<boolean> {
  const admitted = await sql(tx, `INSERT INTO workflow_entries (workflow_id, contact_id) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1`, [
    workflowId,
    contactId,
  ]);
  return admitted.length > 0;
}

// Concurrency guard: only executions still running or waiting are cancelled, and the statement says which.
export async function cancelActiveExecutions(tx: EntityManager, workflowId: string, executionId?: string): Promise<string[]> {
  const rows = await sql<{ id: string }>(
    tx,
    `UPDATE workflow_executions SET status = 'CANCELLED', completed_at = now(), updated_at = now()
     WHERE workflow_id = ? ${executionId ? 'AND id = ?' : ''} AND status IN ('RUNNING', 'WAITING') RETURNING id`,
    [workflowId, ...(executionId ? [executionId] : [])],
  );
  return rows.map((r) => r.id);
}

// Atomic, on every wake-up: the wait ends, its step run completes, the event merges into the context and the execution is read back.
export async function closeWait(
  em: EntityManager,
  executionId: string,
  stepRunId: string,
  output: Record<string, unknown>,
  context: Record<string, unknown>,
): Promise<AutomationExecution | undefined> {
  const [row] = await sql(
    em,
    `WITH w AS (DELETE FROM workflow_waits WHERE execution_id = ?),
          s AS (UPDATE workflow_execution_steps SET status = 'COMPLETED', output = ?::jsonb, completed_at = coalesce(completed_at, now()) WHERE id = ?)
     UPDATE workflow_executions SET context = context || ?::jsonb, updated_at = now(),
            status = CASE WHEN status = 'WAITING' THEN 'RUNNING' ELSE status END
     WHERE id = ? RETURNING *`,
    [executionId, JSON.stringify(output), stepRunId, JSON.stringify(context), executionId],
  );
  return row ? em.map(AutomationExecution, row) : undefined;
}

// Idempotent and atomic: the TRIGGER step's run is recorded once (ON CONFLICT DO NOTHING) as the execution moves to it.
export async function recordTriggerRun(
  em: EntityManager,
  executionId: string,
  stepRunId: string,
  triggerStepId: string,
  output: Record<string, unknown>,
): Promise<void> {
  await sql(
    em,
    `WITH s AS (
       INSERT INTO workflow_execution_steps (id, execution_id, step_id, type, status, output, completed_at)
       VALUES (?, ?, ?, 'TRIGGER', 'COMPLETED', ?::jsonb, now()) ON CONFLICT (id) DO NOTHING
     )
     UPDATE workflow_executions SET current_step_id = ?, updated_at = now() WHERE id = ?`,
    [stepRunId, executionId, triggerStepId, JSON.stringify(output), triggerStepId, executionId],
  );
}

// Idempotent and concurrency-guarded: the step run is upserted, and an execution that has ended keeps its status.
export async function beginStepRun(
  em: EntityManager,
  run: { id: string; executionId: string; stepId: string; type: string; status: 'RUNNING' | 'WAITING' },
): Promise<void> {
  await sql(
    em,
    `WITH s AS (
       INSERT INTO workflow_execution_steps (id, execution_id, step_id, type, status) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (id) DO UPDATE SET status = EXCLUDED.status
     )
     UPDATE workflow_executions
       SET current_step_id = ?, status = CASE WHEN status IN ('RUNNING', 'WAITING') THEN ? ELSE status END, updated_at = now()
       WHERE id = ?`,
    [run.id, run.executionId, run.stepId, run.type, run.status, run.stepId, run.status, run.executionId],
  );
}

// Derived in the database from the step run's first start, so a retried activity does not move it.
export async function setResumeAt(em: EntityManager, executionId: string, stepRunId: string, waitSeconds: number | null): Promise<void> {
  await sql(
    em,
    `UPDATE workflow_executions SET resume_at = (SELECT started_at FROM workflow_execution_steps WHERE id = ?) + ?::float8 * interval '1 second' WHERE id = ?`,
    [stepRunId, waitSeconds, executionId],
  );
}

// Merges into the context in place (jsonb ||): no read-modify-write against a concurrent wake-up.
export async function mergeContext(em: EntityManager, executionId: string, values: Record<string, unknown>): Promise<void> {
  await sql(em, `UPDATE workflow_executions SET context = context || ?::jsonb, updated_at = now() WHERE id = ?`, [JSON.stringify(values), executionId]);
}

// Concurrency guard, atomic: only a running or waiting execution ends (a cancelled one stays so), and its wait goes with it.
export async function endExecution(em: EntityManager, executionId: string, status: string, error: string | null): Promise<void> {
  await sql(
    em,
    `WITH w AS (DELETE FROM workflow_waits WHERE execution_id = ?)
     UPDATE workflow_executions SET status = ?, error = ?, completed_at = coalesce(completed_at, now()), updated_at = now()
     WHERE id = ? AND status IN ('RUNNING', 'WAITING')`,
    [executionId, status, error, executionId],
  );
}

// Concurrency guard: SKIP LOCKED hands each due row to one dispatcher, claimed in the same statement.
export async function claimOutbox(em: EntityManager, batch: number, claimSeconds: number): Promise<AutomationOutboxEntry[]> {
  const rows = await sql(
    em,
    `WITH due AS (
       SELECT id FROM automation_outbox WHERE claimed_until IS NULL OR claimed_until < now()
       ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED
     )
     UPDATE automation_outbox o SET claimed_until = now() + make_interval(secs => ?) FROM due WHERE o.id = due.id RETURNING o.*`,
    [batch, claimSeconds],
  );
  return rows.map((r) => em.map(AutomationOutboxEntry, r));
}

// Set-based, on the hot path: which of a batch's (execution, event name) pairs still wait, in one statement.
export async function stillWaiting(em: EntityManager, wakes: Array<{ executionId: string; eventName: string }>): Promise<Set<string>> {
  if (!wakes.length) return new Set();
  const rows = await sql<{ execution_id: string }>(
    em,
    `SELECT w.execution_id FROM workflow_waits w JOIN unnest(?::uuid[], ?::text[]) AS v(execution_id, event_name)
       ON w.execution_id = v.execution_id AND w.event_name = v.event_name`,
    [wakes.map((w) => w.executionId), wakes.map((w) => w.eventName)],
  );
  return new Set(rows.map((r) => r.execution_id));
}

// Aggregate: in how many seconds the earliest claim of the outbox expires (0 for an unclaimed row, null when empty).
export async function outboxNextDue(em: EntityManager): Promise<number | null> {
  const [next] = await sql<{ due: number | null }>(
    em,
    `SELECT extract(epoch FROM min(coalesce(claimed_until, now())) - now())::float AS due FROM automation_outbox`,
  );
  return next.due;
}

// Aggregate over jsonb_object_keys: the data keys the project's contacts use, from a bounded sample.
export async function contactDataKeys(em: EntityManager, projectId: string): Promise<string[]> {
  const rows = await sql<{ key: string }>(
    em,
    `SELECT DISTINCT k AS key FROM (SELECT jsonb_object_keys(data) AS k FROM contacts WHERE project_id = ? LIMIT 100000) s ORDER BY k LIMIT 500`,
    [projectId],
  );
  return rows.map((r) => r.key);
}
