import type { EntityManager } from '@mikro-orm/postgresql';
import { transaction } from '../../db/orm';
import type { WorkflowStarter } from '../workflow-starter';
import { deleteProjectData } from './accounts.queries';
import { Project } from './accounts.entity';

/** Wipes the project's data in one transaction, after cancelling its running workflows. */
export async function resetProject(em: EntityManager, temporal: WorkflowStarter, projectId: string): Promise<{ cancelledWorkflows: number }> {
  const cancelledWorkflows = await temporal.cancelProjectWorkflows(projectId);
  // Deleting the events writes their negative count deltas in this transaction, so event counts fall
  // to zero without racing the fold; accepted-email counts are billing usage and stay.
  await transaction(em, (tx) => deleteProjectData(tx, projectId, { activityCounts: false }));
  return { cancelledWorkflows };
}

/** Deletes the project and everything it holds, after cancelling its running workflows. */
export async function deleteProject(em: EntityManager, temporal: WorkflowStarter, projectId: string): Promise<void> {
  await temporal.cancelProjectWorkflows(projectId);
  await transaction(em, async (tx) => {
    await deleteProjectData(tx, projectId, { activityCounts: true });
    await tx.nativeDelete(Project, { id: projectId });
  });
}
