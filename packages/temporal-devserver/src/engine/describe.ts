/**
 * Read models of a run: WorkflowExecutionInfo (describe, list) and the visibility row queries
 * filter on. Built from the persisted record alone, so closed runs read back from PostgreSQL look
 * exactly like runs still in memory.
 */
import { decodeB64, type Loose, Memo, msToDur, msToTs, SearchAttributes, type temporal } from '../proto';
import type { VisibilityRow } from '../visibility/row';
import type { ExecutionRecord } from './state';

type IWorkflowExecutionInfo = Loose<temporal.api.workflow.v1.IWorkflowExecutionInfo>;

export function decodeSearchAttributeValues(b64: string | undefined): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(decodeB64(SearchAttributes, b64)?.indexedFields ?? {})) {
    try {
      values[k] = JSON.parse(Buffer.from(p.data ?? []).toString());
    } catch {
      // Non-JSON payloads are not queryable.
    }
  }
  return values;
}

export function executionInfo(s: ExecutionRecord): IWorkflowExecutionInfo {
  return {
    execution: { workflowId: s.workflowId, runId: s.runId },
    type: { name: s.workflowType },
    startTime: msToTs(s.startTime),
    closeTime: s.closeTime !== undefined ? msToTs(s.closeTime) : undefined,
    status: s.status,
    historyLength: s.nextEventId - 1,
    parentNamespaceId: s.parent ? s.parent.namespace : undefined,
    parentExecution: s.parent ? { workflowId: s.parent.workflowId, runId: s.parent.runId } : undefined,
    rootExecution: s.root ? { workflowId: s.root.workflowId, runId: s.root.runId } : { workflowId: s.workflowId, runId: s.runId },
    executionTime: msToTs(s.executionTime),
    memo: decodeB64(Memo, s.memo) ?? undefined,
    searchAttributes: decodeB64(SearchAttributes, s.searchAttributes) ?? undefined,
    taskQueue: s.taskQueue,
    stateTransitionCount: s.stateTransitions,
    historySizeBytes: s.historySizeBytes,
    executionDuration: s.closeTime !== undefined ? msToDur(Math.max(0, s.closeTime - s.executionTime)) : undefined,
    firstRunId: s.firstRunId,
  };
}

export function visibilityRow(s: ExecutionRecord, searchAttributes?: Record<string, unknown>): VisibilityRow {
  return {
    namespace: s.namespace,
    workflowId: s.workflowId,
    runId: s.runId,
    workflowType: s.workflowType,
    taskQueue: s.taskQueue,
    status: s.status,
    startTime: s.startTime,
    executionTime: s.executionTime,
    closeTime: s.closeTime,
    historyLength: s.nextEventId - 1,
    historySizeBytes: s.historySizeBytes,
    stateTransitions: s.stateTransitions,
    parentWorkflowId: s.parent?.workflowId,
    parentRunId: s.parent?.runId,
    rootWorkflowId: s.root?.workflowId ?? s.workflowId,
    rootRunId: s.root?.runId ?? s.runId,
    searchAttributes: searchAttributes ?? decodeSearchAttributeValues(s.searchAttributes),
  };
}
