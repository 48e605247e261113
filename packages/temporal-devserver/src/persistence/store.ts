/**
 * What durable persistence must provide. The engine keeps every open run in memory and writes
 * each operation's changes as one batch; a store makes the batch durable (in order) before the
 * operation answers, and serves closed runs and visibility queries back.
 *
 * In memory mode there is no store at all: the engine is the only copy.
 */
import type { NamespaceRecord } from '../engine/namespaces';
import type { ExecutionRecord } from '../engine/state';
import type { VisibilityQuery } from '../visibility/query';
import type { VisibilityRow } from '../visibility/row';

export interface ExecutionWrite {
  /** JSON of the ExecutionRecord as of the end of the operation. */
  state: string;
  row: VisibilityRow;
  startRequestId: string;
  /** Events appended by the operation, the first with id `firstEventId`. */
  firstEventId: number;
  events: Buffer[];
}

/** A schedule's state as of the end of an operation (JSON), or its deletion. */
export interface ScheduleWrite {
  namespace: string;
  scheduleId: string;
  state: string;
  deleted: boolean;
}

export interface CommitBatch {
  executions: ExecutionWrite[];
  schedules: ScheduleWrite[];
  /** workflow id -> run id pointers that moved to a new run. */
  currentRuns: { namespace: string; workflowId: string; runId: string }[];
}

export interface PersistedExecution {
  record: ExecutionRecord;
  history: Buffer[];
}

export interface CurrentRunInfo {
  runId: string;
  status: number;
  startRequestId: string;
}

export interface ListPage {
  records: ExecutionRecord[];
  nextOffset?: number;
}

export interface Store {
  /** Resolves once the batch is durable; batches become durable in the order they were given. */
  commit(batch: CommitBatch): Promise<void>;
  loadNamespaces(): Promise<NamespaceRecord[]>;
  saveNamespace(ns: NamespaceRecord): Promise<void>;
  /** States (JSON) of every schedule not deleted. */
  loadSchedules(): Promise<string[]>;
  /** Every run still open, with its full history: the working set after a restart. */
  loadOpenExecutions(): Promise<PersistedExecution[]>;
  loadExecution(namespace: string, runId: string): Promise<PersistedExecution | undefined>;
  currentRun(namespace: string, workflowId: string): Promise<CurrentRunInfo | undefined>;
  list(namespace: string, query: VisibilityQuery, offset: number, limit: number): Promise<ListPage>;
  count(namespace: string, query: VisibilityQuery): Promise<number>;
  /** Matching runs per ExecutionStatus (enum value -> count); statuses with none are absent. */
  countByStatus(namespace: string, query: VisibilityQuery): Promise<Map<number, number>>;
  /** Deletes runs of `namespace` closed before `cutoff` (retention); returns how many. */
  deleteClosedBefore(namespace: string, cutoff: number): Promise<number>;
  close(): Promise<void>;
}
