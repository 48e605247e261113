import type { EntityManager } from '@mikro-orm/postgresql';
import { transaction } from '../../db/orm';
import type { TemporalClient } from '../../../temporal/client';
import { deleteProjectData } from './accounts.queries';
import { Project } from './accounts.entity';

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
  // Deleting the events writes their negative count deltas in this transaction, so event counts fall
  // to zero without racing the fold; accepted-email counts are billing usage and stay.
  await transaction(em, (tx) => deleteProjectData(tx, projectId, { activityCounts: false }));
  return { cancelledWorkflows };
}

/** Deletes the project and everything it holds, after cancelling its running workflows. */
export async function deleteProject(em: EntityManager, temporal: TemporalClient, projectId: string): Promise<void> {
  await cancelProjectWorkflows(temporal, projectId);
  await transaction(em, async (tx) => {
    await deleteProjectData(tx, projectId, { activityCounts: true });
    await tx.nativeDelete(Project, { id: projectId });
  });
}
