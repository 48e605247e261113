/**
 * The persisted "mutable state" of one workflow run: everything needed to continue the run after a
 * restart besides its history. Plain JSON (binary protobuf fields as base64) so PostgreSQL can keep
 * it in one column; times are epoch milliseconds on the server clock.
 *
 * Some facts are deliberately NOT persisted: which worker holds a workflow or activity task right
 * now. After a restart those tasks are simply dispatched again, and the late answer of the old
 * worker is refused (workflow tasks) or accepted if it still matches the attempt (activities).
 */
import type { RetryPolicyRecord } from './retry-policy';

export const STATE_VERSION = 1;

export interface ExecutionKey {
  namespace: string;
  workflowId: string;
  runId: string;
}

export interface ParentRef {
  namespace: string;
  workflowId: string;
  runId: string;
  initiatedEventId: number;
}

export interface WorkflowTaskRecord {
  /** Increments for every workflow task scheduled in this run; identifies it in task tokens. */
  seq: number;
  attempt: number;
  /** 0 while the task is transient (attempt > 1): its events are only written when it completes. */
  scheduledEventId: number;
  scheduledTime: number;
  originalScheduledTime: number;
  taskQueue: string;
  /** Runtime only (reset on load): the worker currently holding the task. */
  started?: { time: number; identity: string; requestId: string; startedEventId: number };
}

export type ActivityPhase = 'scheduled' | 'started' | 'backoff';

export interface ActivityRecord {
  scheduledEventId: number;
  activityId: string;
  activityType: string;
  taskQueue: string;
  attempt: number;
  phase: ActivityPhase;
  firstScheduledTime: number;
  attemptScheduledTime: number;
  /** When the current backoff ends (phase 'backoff'). */
  nextAttemptAt?: number;
  scheduleToCloseMs: number;
  scheduleToStartMs: number;
  startToCloseMs: number;
  heartbeatMs: number;
  retry: RetryPolicyRecord;
  cancelRequested?: boolean;
  cancelRequestedEventId?: number;
  /** Encoded Payloads (base64). */
  heartbeatDetails?: string;
  lastHeartbeatTime?: number;
  /** Encoded Failure (base64) of the previous attempt. */
  lastFailure?: string;
  lastWorkerIdentity?: string;
  lastStartedTime?: number;
  lastAttemptCompleteTime?: number;
  /** Runtime only (reset on load). */
  started?: { time: number; identity: string; requestId: string };
}

export interface TimerRecord {
  timerId: string;
  startedEventId: number;
  fireAt: number;
}

export interface ChildRecord {
  initiatedEventId: number;
  namespace: string;
  workflowId: string;
  runId: string;
  workflowType: string;
  parentClosePolicy: number;
  /** 0 until ChildWorkflowExecutionStarted is in the history (it may sit in the buffer). */
  startedEventId: number;
}

/**
 * A workflow update, from admission until its outcome. Admission is persisted with the run, so an
 * update a client was told is admitted survives a restart of the server and is delivered again.
 */
export interface UpdateRecord {
  updateId: string;
  /** admitted: waits for the workflow to accept or reject it; aborted: the run closed first. */
  stage: 'admitted' | 'accepted' | 'completed' | 'aborted';
  /** Encoded temporal.api.update.v1.Request (base64) until accepted (then it is in the history). */
  request?: string;
  /** Runtime only (reset on load): the workflow task that carried the request to a worker. */
  sentSeq?: number;
  acceptedEventId?: number;
  /** Its WorkflowExecutionUpdateCompleted event, when the workflow completed it. */
  completedEventId?: number;
  /** Encoded Outcome (base64) of an update that ended without a completion event (rejected, or accepted when the run closed). */
  outcome?: string;
  /** Whether the run continued as new before it could be delivered (the client retries on the new run). */
  continued?: boolean;
}

export interface ExecutionRecord {
  v: number;
  namespace: string;
  workflowId: string;
  runId: string;
  firstRunId: string;
  workflowType: string;
  taskQueue: string;
  status: number;
  startTime: number;
  /** When the first workflow task may run: start time plus any start delay or retry backoff. */
  executionTime: number;
  closeTime?: number;
  attempt: number;
  runTimeoutMs: number;
  executionTimeoutMs: number;
  workflowTaskTimeoutMs: number;
  runExpiresAt?: number;
  executionExpiresAt?: number;
  startRequestId: string;
  /** Request ids of signals already applied, newest last (bounded), for dedupe. */
  signalRequestIds: string[];
  parent?: ParentRef;
  root?: { workflowId: string; runId: string };
  retryPolicy?: RetryPolicyRecord;
  /** A cron workflow's schedule: each run that closes (other than by cancel or terminate) starts the next at its next time. */
  cronSchedule?: string;
  /** Encoded Memo / SearchAttributes (base64). */
  memo?: string;
  searchAttributes?: string;
  nextEventId: number;
  /** Started event id of the last completed workflow task (what the SDK calls previousStartedEventId). */
  lastCompletedWftStartedId: number;
  wftSeq: number;
  wft?: WorkflowTaskRecord;
  /** Until this time no workflow task is scheduled (start delay, retry backoff). */
  backoffUntil?: number;
  activities: ActivityRecord[];
  timers: TimerRecord[];
  children: ChildRecord[];
  cancelRequested: boolean;
  /** Workflow updates of this run, oldest first (absent in records written before updates existed). */
  updates?: UpdateRecord[];
  /** Events that arrived while a workflow task was running, encoded without event ids (base64). */
  buffered: string[];
  /** Run that continued this one (continue-as-new, retry), once closed. */
  newRunId?: string;
  historySizeBytes: number;
  stateTransitions: number;
}
