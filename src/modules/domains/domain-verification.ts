import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes, workflowIds } from '../../../temporal/workflow-ids';
import { domainVerificationWorkflow } from '../../../temporal/workflows/domain-verification';

/** Starts the background checks of a new domain (`domain-verification:<domainId>`). */
export async function startDomainVerification(t: TemporalClient, d: { id: string; projectId: string }): Promise<void> {
  await t.client.workflow.start(domainVerificationWorkflow, {
    workflowId: workflowIds.domainVerification(d.id),
    taskQueue: t.taskQueue,
    args: [{ domainId: d.id }],
    typedSearchAttributes: [
      { key: searchAttributes.ProjectId, value: d.projectId },
      { key: searchAttributes.DomainId, value: d.id },
    ],
  });
}

/** Stops the checks of a deleted domain now; were this to fail, the next check finds no domain and ends. */
export async function stopDomainVerification(t: TemporalClient, domainId: string): Promise<void> {
  await t.client.workflow
    .getHandle(workflowIds.domainVerification(domainId))
    .cancel()
    .catch(() => {});
}
