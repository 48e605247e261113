import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes } from '../../../temporal/workflow-ids';
import type { bulkJobWorkflow } from '../../../temporal/workflows/bulk-job';
import type { contactImportWorkflow } from '../../../temporal/workflows/contact-import';

/** Starts the workflow that runs a queued job, findable in the Web UI by `ProjectId` and `JobId`. */
export async function startJobWorkflow(
  temporal: TemporalClient,
  workflow: typeof bulkJobWorkflow | typeof contactImportWorkflow,
  workflowId: string,
  job: { id: string; projectId: string },
): Promise<void> {
  await temporal.client.workflow.start(workflow, {
    workflowId,
    taskQueue: temporal.taskQueue,
    args: [{ jobId: job.id }],
    typedSearchAttributes: [
      { key: searchAttributes.ProjectId, value: job.projectId },
      { key: searchAttributes.JobId, value: job.id },
    ],
  });
}
