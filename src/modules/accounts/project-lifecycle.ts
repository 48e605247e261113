import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, transaction } from '../../db/orm';
import type { TemporalClient } from '../../../temporal/client';

/**
 * Everything a project holds, in an order its foreign keys accept (campaigns before the segments
 * they RESTRICT, everything hanging off contacts by cascade). The project, its keys, its members
 * and invitations, and its rate-limit window stay.
 */
const PROJECT_DATA = [
  // Its deliveries go with it (cascade).
  'webhook_endpoints',
  'automation_outbox',
  'workflows',
  'campaigns',
  'segments',
  'templates',
  'domains',
  'contacts',
  'events',
  'emails',
  'contact_counts',
  // After `contacts`, whose deletion writes the deltas.
  'contact_count_deltas',
  'bulk_jobs',
  'contact_imports',
  'idempotency_keys',
];

/** Cancels every running workflow of the project (found by its ProjectId search attribute). */
export async function cancelProjectWorkflows(temporal: TemporalClient, projectId: string): Promise<number> {
  let cancelled = 0;
  for await (const wf of temporal.client.workflow.list({ query: `ProjectId = "${projectId}" AND ExecutionStatus = "Running"` })) {
    await temporal.client.workflow
      .getHandle(wf.workflowId, wf.runId)
      .cancel()
      .then(() => cancelled++)
      .catch(() => {}); // ended meanwhile
  }
  return cancelled;
}

/** Wipes the project's data in one transaction, after cancelling its running workflows. */
export async function resetProject(em: EntityManager, temporal: TemporalClient, projectId: string): Promise<{ cancelledWorkflows: number }> {
  const cancelledWorkflows = await cancelProjectWorkflows(temporal, projectId);
  await transaction(em, async (tx) => {
    // Deleting the events writes their negative count deltas in this transaction, so event counts fall
    // to zero without racing the fold; accepted-email counts are billing usage and stay.
    for (const table of PROJECT_DATA) await sql(tx, `DELETE FROM ${table} WHERE project_id = ?`, [projectId]);
  });
  return { cancelledWorkflows };
}

/** Deletes the project and everything it holds, after cancelling its running workflows. */
export async function deleteProject(em: EntityManager, temporal: TemporalClient, projectId: string): Promise<void> {
  await cancelProjectWorkflows(temporal, projectId);
  await transaction(em, async (tx) => {
    for (const table of PROJECT_DATA) await sql(tx, `DELETE FROM ${table} WHERE project_id = ?`, [projectId]);
    await sql(tx, `DELETE FROM activity_count_deltas WHERE project_id = ?`, [projectId]);
    await sql(tx, `DELETE FROM projects WHERE id = ?`, [projectId]);
  });
}
