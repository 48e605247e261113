import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes } from '../../../temporal/task-queues';

/** Starts the workflow that runs a queued job, findable in the Web UI by `ProjectId` and `JobId`. */
export async function startJobWorkflow(temporal: TemporalClient, type: string, workflowId: string, job: { id: string; projectId: string }): Promise<void> {
  await temporal.client.workflow.start(type, {
    workflowId,
    taskQueue: temporal.taskQueue,
    args: [{ jobId: job.id }],
    typedSearchAttributes: [
      { key: searchAttributes.ProjectId, value: job.projectId },
      { key: searchAttributes.JobId, value: job.id },
    ],
  });
}
