import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes, workflowIds } from '../../../temporal/workflow-ids';
import { segmentRefreshWorkflow } from '../../../temporal/workflows/segment-refresh';

/** Starts `segment:<segmentId>`, which keeps the segment's count (and tracked membership) fresh until it is deleted. */
export async function startSegmentRefresh(t: TemporalClient, s: { id: string; projectId: string }): Promise<void> {
  await t.client.workflow.start(segmentRefreshWorkflow, {
    workflowId: workflowIds.segment(s.id),
    taskQueue: t.taskQueue,
    args: [{ segmentId: s.id }],
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: [
      { key: searchAttributes.ProjectId, value: s.projectId },
      { key: searchAttributes.SegmentId, value: s.id },
    ],
  });
}
