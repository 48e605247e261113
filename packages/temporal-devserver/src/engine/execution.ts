/**
 * One workflow run: its history and its mutable state, and every transition that appends events.
 * Everything here is synchronous and touches only this run; the engine wraps calls in an operation
 * that persists the result, dispatches new tasks and applies effects on other runs.
 */
import crypto from 'node:crypto';
import {
  decodeB64,
  encodeB64,
  encodeEvent,
  decodeEvent,
  enums,
  Failure,
  type IFailure,
  type IHeader,
  type IHistoryEvent,
  type IMemo,
  type IPayload,
  type IPayloads,
  type ISearchAttributes,
  Memo,
  msToDur,
  msToTs,
  Payloads,
  SearchAttributes,
  num,
  type temporal,
} from '../proto';
import { attributesKey, attributesOf, EventType, isBufferable, isDeferredOnFlush, type EventTypeValue } from './history';
import { decideRetry, retryPolicyProto } from './retry-policy';
import { decodeSearchAttributeValues } from './describe';
import type { ActivityRecord, ExecutionRecord, TimerRecord, WorkflowTaskRecord } from './state';
import type { Clock, TimerOwner } from './timer-queue';
import { forgetSentUpdates } from './updates';

const Status = enums.WorkflowExecutionStatus;
const TimeoutType = enums.TimeoutType;
const RetryState = enums.RetryState;
const NORMAL_QUEUE = enums.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;

/** History length and size at which the server suggests continue-as-new (Temporal's defaults). */
const SUGGEST_CAN_EVENTS = 4 * 1024;
const SUGGEST_CAN_BYTES = 4 * 1024 * 1024;
const MAX_SIGNAL_REQUEST_IDS = 100;

/** Something the engine must hand to matching once the operation is durable. */
export type OutboxTask = { kind: 'workflow'; seq: number } | { kind: 'activity'; rec: ActivityRecord; attempt: number };

export interface ExecutionHost {
  /** Called by the timer queue when this run's earliest deadline is due. */
  onDeadline(exec: Execution, now: number): void;
}

/** A Payload meaning "remove this key" in memo and search-attribute upserts. */
export function isNilPayload(p: IPayload | null | undefined): boolean {
  if (!p) return true;
  const data = p.data ? Buffer.from(p.data).toString() : '';
  return data === '' || data === 'null' || data === '[]';
}

export function mergePayloadMap(base: Record<string, IPayload> | undefined, upsert: Record<string, IPayload> | null | undefined): Record<string, IPayload> {
  const out: Record<string, IPayload> = { ...(base ?? {}) };
  for (const [k, v] of Object.entries(upsert ?? {})) {
    if (isNilPayload(v)) delete out[k];
    else out[k] = v;
  }
  return out;
}

function timeoutFailure(message: string, timeoutType: number, details?: IPayloads, cause?: IFailure): IFailure {
  return {
    message,
    source: '',
    timeoutFailureInfo: { timeoutType, lastHeartbeatDetails: details },
    cause,
  };
}

/** The timeouts an activity's current phase can reach, each with its deadline. */
function activityTimeouts(a: ActivityRecord): Array<[at: number, type: number]> {
  const out: Array<[at: number, type: number]> = [];
  if (a.scheduleToCloseMs) out.push([a.firstScheduledTime + a.scheduleToCloseMs, TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE]);
  if (a.phase === 'scheduled' && a.scheduleToStartMs) out.push([a.attemptScheduledTime + a.scheduleToStartMs, TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START]);
  if (a.phase === 'started' && a.started) {
    if (a.startToCloseMs) out.push([a.started.time + a.startToCloseMs, TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE]);
    if (a.heartbeatMs) out.push([Math.max(a.started.time, a.lastHeartbeatTime ?? 0) + a.heartbeatMs, TimeoutType.TIMEOUT_TYPE_HEARTBEAT]);
  }
  return out;
}

/**
 * The activity timeout that fires at `now`, if any: the earliest due deadline, and of equal deadlines the
 * lower timeout type, as Temporal orders its activity timers (so schedule-to-start, which defaults to
 * schedule-to-close, wins over it when no worker ever took the task).
 */
function dueActivityTimeout(a: ActivityRecord, now: number): number | undefined {
  const due = activityTimeouts(a)
    .filter(([at]) => at <= now)
    .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  return due[0]?.[1];
}

export class Execution implements TimerOwner {
  timerIndex = -1;
  timerAt = 0;
  /** Events appended since the last time the engine persisted this run. */
  unpersisted: Buffer[] = [];
  /** Tasks created by this operation, for matching once persisted. */
  outbox: OutboxTask[] = [];
  /** Set by anything that needs the workflow to make a new decision; consumed by maybeScheduleWorkflowTask. */
  needsWorkflowTask = false;
  /** Set when this operation closed the run, so the engine applies close effects once. */
  closedNow = false;
  /** Encoded WorkflowTaskScheduled (transient only) and WorkflowTaskStarted of the running task. */
  private pendingWftEvents: Buffer[] = [];
  /** Decoded search attributes, for visibility queries. */
  searchAttributeValues: Record<string, unknown> = {};
  /** Long polls waiting for new events of this run. */
  readonly waiters = new Set<() => void>();
  /**
   * The worker that has this run cached asked for its next tasks on its own (sticky) queue; not
   * persisted: after a restart every task goes to the normal queue with the full history.
   */
  sticky?: { queue: string; timeoutMs: number };

  constructor(
    readonly s: ExecutionRecord,
    readonly history: Buffer[],
    private readonly clock: Clock,
    private readonly host: ExecutionHost,
  ) {
    this.refreshSearchAttributeValues();
  }

  get key(): string {
    return `${this.s.namespace}/${this.s.runId}`;
  }

  get running(): boolean {
    return this.s.status === Status.WORKFLOW_EXECUTION_STATUS_RUNNING;
  }

  get wftStarted(): boolean {
    return !!this.s.wft?.started;
  }

  onTimer(now: number): void {
    this.host.onDeadline(this, now);
  }

  // ---------------------------------------------------------------- events

  /** Appends an event to the history now; the run must not have a running workflow task. */
  appendEvent(type: EventTypeValue, attrs: object, extra?: Partial<IHistoryEvent>): number {
    if (this.pendingWftEvents.length) throw new Error('cannot append while a workflow task is running');
    const eventId = this.s.nextEventId++;
    const encoded = encodeEvent({
      eventId,
      eventTime: msToTs(this.clock.now()),
      eventType: type,
      ...extra,
      [attributesKey(type)]: attrs,
    });
    this.pushEncoded(encoded);
    return eventId;
  }

  private pushEncoded(encoded: Buffer): void {
    this.history.push(encoded);
    this.unpersisted.push(encoded);
    this.s.historySizeBytes += encoded.length;
  }

  /** Appends now, or buffers until the running workflow task completes. Returns 0 when buffered. */
  addEvent(type: EventTypeValue, attrs: object, extra?: Partial<IHistoryEvent>): number {
    if (this.wftStarted && isBufferable(type)) {
      const encoded = encodeEvent({
        eventTime: msToTs(this.clock.now()),
        eventType: type,
        ...extra,
        [attributesKey(type)]: attrs,
      });
      this.s.buffered.push(encoded.toString('base64'));
      return 0;
    }
    return this.appendEvent(type, attrs, extra);
  }

  get hasBufferedEvents(): boolean {
    return this.s.buffered.length > 0;
  }

  /**
   * Writes buffered events into the history: completions after the Started events they refer to,
   * with ids and started ids filled in.
   */
  flushBuffer(): void {
    if (!this.s.buffered.length) return;
    const events = this.s.buffered.map((b64) => decodeEvent(Buffer.from(b64, 'base64')));
    this.s.buffered = [];
    const ordered = [...events.filter((e) => !isDeferredOnFlush(e.eventType)), ...events.filter((e) => isDeferredOnFlush(e.eventType))];
    const activityStarted = new Map<number, number>();
    const childStarted = new Map<number, number>();
    for (const e of ordered) {
      const eventId = this.s.nextEventId++;
      if (e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED) {
        activityStarted.set(num(e.activityTaskStartedEventAttributes!.scheduledEventId), eventId);
      } else if (e.eventType === EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED) {
        const initiated = num(e.childWorkflowExecutionStartedEventAttributes!.initiatedEventId);
        childStarted.set(initiated, eventId);
        const child = this.s.children.find((c) => c.initiatedEventId === initiated);
        if (child) child.startedEventId = eventId;
      } else if (isDeferredOnFlush(e.eventType)) {
        const attrs = (e as unknown as Record<string, { scheduledEventId?: unknown; initiatedEventId?: unknown; startedEventId?: unknown }>)[
          attributesKey(e.eventType)
        ];
        if (!num(attrs.startedEventId as number)) {
          const ref =
            attrs.scheduledEventId !== undefined && num(attrs.scheduledEventId as number)
              ? activityStarted.get(num(attrs.scheduledEventId as number))
              : childStarted.get(num(attrs.initiatedEventId as number));
          if (ref) attrs.startedEventId = ref;
        }
      }
      e.eventId = eventId as unknown as typeof e.eventId;
      this.pushEncoded(encodeEvent(e));
    }
  }

  // ---------------------------------------------------------------- workflow tasks

  /** Schedules a workflow task if something needs one and nothing prevents it. */
  maybeScheduleWorkflowTask(): void {
    if (!this.needsWorkflowTask || !this.running || this.s.wft) return;
    if (this.s.backoffUntil !== undefined && this.s.backoffUntil > this.clock.now()) return;
    this.s.backoffUntil = undefined;
    this.needsWorkflowTask = false;
    this.scheduleWorkflowTask(1);
  }

  private scheduleWorkflowTask(attempt: number): void {
    const now = this.clock.now();
    // New events make the next task a fresh first attempt (Temporal does the same).
    if (this.s.buffered.length) attempt = 1;
    this.flushBuffer();
    const seq = ++this.s.wftSeq;
    const wft: WorkflowTaskRecord = {
      seq,
      attempt,
      scheduledEventId: 0,
      scheduledTime: now,
      originalScheduledTime: now,
      taskQueue: this.s.taskQueue,
    };
    if (attempt === 1) {
      wft.scheduledEventId = this.appendEvent(EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, {
        taskQueue: { name: this.s.taskQueue, kind: NORMAL_QUEUE },
        startToCloseTimeout: msToDur(this.s.workflowTaskTimeoutMs),
        attempt: 1,
      });
    }
    this.s.wft = wft;
    this.outbox.push({ kind: 'workflow', seq });
  }

  /**
   * A transient task (a retry after failures) turns into a normal one when new events arrive, so
   * those events are not hidden behind its not-yet-written Scheduled event.
   */
  private makeTransientTaskNormal(): void {
    const wft = this.s.wft;
    if (!wft || wft.started || wft.scheduledEventId) return;
    wft.attempt = 1;
    wft.scheduledEventId = this.appendEvent(EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, {
      taskQueue: { name: this.s.taskQueue, kind: NORMAL_QUEUE },
      startToCloseTimeout: msToDur(this.s.workflowTaskTimeoutMs),
      attempt: 1,
    });
  }

  /** Hands the scheduled workflow task to a worker; returns what the poll response needs. */
  startWorkflowTask(seq: number, identity: string): { wft: WorkflowTaskRecord; events: Buffer[]; startedEventId: number; requestId: string } | undefined {
    const wft = this.s.wft;
    if (!this.running || !wft || wft.seq !== seq || wft.started) return undefined;
    const now = this.clock.now();
    const requestId = crypto.randomUUID();
    let next = this.s.nextEventId;
    const pending: Buffer[] = [];
    let scheduledEventId = wft.scheduledEventId;
    if (!scheduledEventId) {
      scheduledEventId = next++;
      pending.push(
        encodeEvent({
          eventId: scheduledEventId,
          eventTime: msToTs(wft.scheduledTime),
          eventType: EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
          workflowTaskScheduledEventAttributes: {
            taskQueue: { name: wft.taskQueue, kind: NORMAL_QUEUE },
            startToCloseTimeout: msToDur(this.s.workflowTaskTimeoutMs),
            attempt: wft.attempt,
          },
        }),
      );
    }
    const startedEventId = next;
    const historyEvents = startedEventId;
    const suggest = historyEvents >= SUGGEST_CAN_EVENTS || this.s.historySizeBytes >= SUGGEST_CAN_BYTES;
    const reasons: number[] = [];
    if (historyEvents >= SUGGEST_CAN_EVENTS) reasons.push(enums.SuggestContinueAsNewReason.SUGGEST_CONTINUE_AS_NEW_REASON_TOO_MANY_HISTORY_EVENTS);
    if (this.s.historySizeBytes >= SUGGEST_CAN_BYTES) reasons.push(enums.SuggestContinueAsNewReason.SUGGEST_CONTINUE_AS_NEW_REASON_HISTORY_SIZE_TOO_LARGE);
    pending.push(
      encodeEvent({
        eventId: startedEventId,
        eventTime: msToTs(now),
        eventType: EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
        workflowTaskStartedEventAttributes: {
          scheduledEventId,
          identity,
          requestId,
          historySizeBytes: this.s.historySizeBytes,
          suggestContinueAsNew: suggest,
          suggestContinueAsNewReasons: reasons,
        },
      }),
    );
    wft.started = { time: now, identity, requestId, startedEventId };
    this.pendingWftEvents = pending;
    // Everything so far is in this task's history; only later events need another task.
    this.needsWorkflowTask = false;
    return { wft, events: pending, startedEventId, requestId };
  }

  /** Scheduled/Started events of the running task, as sent to its worker (not yet in the history). */
  get runningTaskEvents(): readonly Buffer[] {
    return this.pendingWftEvents;
  }

  /** Writes the running task's Scheduled/Started events into the history. */
  private materializeRunningTask(): { scheduledEventId: number; startedEventId: number } {
    const wft = this.s.wft!;
    const started = wft.started!;
    for (const e of this.pendingWftEvents) {
      this.s.nextEventId++;
      this.pushEncoded(e);
    }
    this.pendingWftEvents = [];
    const scheduledEventId = wft.scheduledEventId || started.startedEventId - 1;
    if (this.s.nextEventId !== started.startedEventId + 1) throw new Error('workflow task event ids out of step');
    return { scheduledEventId, startedEventId: started.startedEventId };
  }

  /** First step of completing the running task: its events plus WorkflowTaskCompleted. */
  beginWorkflowTaskCompletion(attrs: {
    identity: string;
    binaryChecksum?: string;
    sdkMetadata?: object | null;
    meteringMetadata?: object | null;
    workerVersion?: object | null;
  }): number {
    const { scheduledEventId, startedEventId } = this.materializeRunningTask();
    const completedId = this.appendEvent(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, {
      scheduledEventId,
      startedEventId,
      ...attrs,
    });
    this.s.lastCompletedWftStartedId = startedEventId;
    this.s.wft = undefined;
    return completedId;
  }

  /**
   * The running or scheduled task failed (worker report, bad commands, timeout). First attempts
   * write the failure into the history; retries of a failing task stay transient.
   */
  failWorkflowTask(kind: { timedOut: true } | { timedOut: false; cause: number; failure?: IFailure | null; identity: string }): void {
    const wft = this.s.wft;
    if (!wft) return;
    // The worker may have dropped the run from its cache: the retry goes out with full history.
    this.sticky = undefined;
    if (wft.started && wft.scheduledEventId) {
      const { scheduledEventId, startedEventId } = this.materializeRunningTask();
      if (kind.timedOut) {
        this.appendEvent(EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, {
          scheduledEventId,
          startedEventId,
          timeoutType: TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
        });
      } else {
        this.appendEvent(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, {
          scheduledEventId,
          startedEventId,
          cause: kind.cause,
          failure: kind.failure ?? undefined,
          identity: kind.identity,
        });
      }
    }
    this.pendingWftEvents = [];
    this.s.wft = undefined;
    if (this.running) this.scheduleWorkflowTask(wft.attempt + 1);
  }

  /** Closing the run from outside while a task runs: the task is failed first, as Temporal does. */
  private abandonWorkflowTask(): void {
    const wft = this.s.wft;
    if (wft?.started) {
      const { scheduledEventId, startedEventId } = this.materializeRunningTask();
      this.appendEvent(EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED, {
        scheduledEventId,
        startedEventId,
        cause: enums.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND,
      });
    }
    this.pendingWftEvents = [];
    this.s.wft = undefined;
  }

  // ---------------------------------------------------------------- external events

  /** Marks that something new (an event, an update) needs a decision; a pending transient task becomes a normal one. */
  wakeWorkflow(): void {
    this.needsWorkflowTask = true;
    this.makeTransientTaskNormal();
  }

  addExternalEvent(type: EventTypeValue, attrs: object): number {
    const id = this.addEvent(type, attrs);
    this.wakeWorkflow();
    return id;
  }

  hasSignalRequest(requestId: string | undefined | null): boolean {
    return !!requestId && this.s.signalRequestIds.includes(requestId);
  }

  signal(attrs: {
    signalName: string;
    input?: IPayloads | null;
    identity?: string | null;
    header?: IHeader | null;
    requestId?: string | null;
    externalWorkflowExecution?: { workflowId: string; runId: string };
  }): void {
    if (attrs.requestId) {
      this.s.signalRequestIds.push(attrs.requestId);
      if (this.s.signalRequestIds.length > MAX_SIGNAL_REQUEST_IDS) this.s.signalRequestIds.shift();
    }
    this.addExternalEvent(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, {
      signalName: attrs.signalName,
      input: attrs.input ?? undefined,
      identity: attrs.identity ?? '',
      header: attrs.header ?? undefined,
      requestId: attrs.requestId ?? '',
      externalWorkflowExecution: attrs.externalWorkflowExecution,
    });
  }

  /** Records a cancellation request once; later requests are no-ops, as in Temporal. */
  requestCancel(attrs: {
    cause?: string;
    identity?: string;
    externalInitiatedEventId?: number;
    externalWorkflowExecution?: { workflowId: string; runId: string };
  }): void {
    if (this.s.cancelRequested) return;
    this.s.cancelRequested = true;
    this.addExternalEvent(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED, attrs);
  }

  // ---------------------------------------------------------------- closing

  /**
   * Closes the run with `type`. External closes (terminate, timeout) fail a running task first and
   * flush the buffer so no accepted event is lost from the history.
   */
  close(status: number, type: EventTypeValue, attrs: object, external: boolean): number {
    if (external) {
      this.abandonWorkflowTask();
      this.flushBuffer();
    }
    this.pendingWftEvents = [];
    this.s.wft = undefined;
    const eventId = this.appendEvent(type, attrs);
    this.s.status = status;
    this.s.closeTime = this.clock.now();
    this.s.activities = [];
    this.s.timers = [];
    this.s.backoffUntil = undefined;
    this.needsWorkflowTask = false;
    this.outbox = [];
    this.closedNow = true;
    return eventId;
  }

  terminate(reason: string, details: IPayloads | null | undefined, identity: string): void {
    this.close(
      Status.WORKFLOW_EXECUTION_STATUS_TERMINATED,
      EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
      { reason, details: details ?? undefined, identity },
      true,
    );
  }

  // ---------------------------------------------------------------- timers

  startTimer(timerId: string, durationMs: number, workflowTaskCompletedEventId: number, userMetadata?: object | null): void {
    const startedEventId = this.appendEvent(
      EventType.EVENT_TYPE_TIMER_STARTED,
      { timerId, startToFireTimeout: msToDur(durationMs), workflowTaskCompletedEventId },
      userMetadata ? { userMetadata } : undefined,
    );
    this.s.timers.push({ timerId, startedEventId, fireAt: this.clock.now() + durationMs });
  }

  cancelTimer(timerId: string, workflowTaskCompletedEventId: number, identity: string): void {
    const i = this.s.timers.findIndex((t) => t.timerId === timerId);
    const timer = this.s.timers[i];
    this.s.timers.splice(i, 1);
    this.appendEvent(EventType.EVENT_TYPE_TIMER_CANCELED, {
      timerId,
      startedEventId: timer.startedEventId,
      workflowTaskCompletedEventId,
      identity,
    });
  }

  private fireTimer(t: TimerRecord): void {
    this.s.timers.splice(this.s.timers.indexOf(t), 1);
    this.addExternalEvent(EventType.EVENT_TYPE_TIMER_FIRED, { timerId: t.timerId, startedEventId: t.startedEventId });
  }

  // ---------------------------------------------------------------- activities

  activityByScheduledId(id: number): ActivityRecord | undefined {
    return this.s.activities.find((a) => a.scheduledEventId === id);
  }

  activityById(activityId: string): ActivityRecord | undefined {
    return this.s.activities.find((a) => a.activityId === activityId);
  }

  addActivity(rec: ActivityRecord): void {
    this.s.activities.push(rec);
    this.outbox.push({ kind: 'activity', rec, attempt: rec.attempt });
  }

  startActivity(rec: ActivityRecord, identity: string): string {
    const requestId = crypto.randomUUID();
    const now = this.clock.now();
    rec.phase = 'started';
    rec.started = { time: now, identity, requestId };
    rec.lastStartedTime = now;
    rec.lastWorkerIdentity = identity;
    return requestId;
  }

  recordHeartbeat(rec: ActivityRecord, details: IPayloads | null | undefined): void {
    if (details) rec.heartbeatDetails = encodeB64(Payloads, details);
    rec.lastHeartbeatTime = this.clock.now();
  }

  private removeActivity(rec: ActivityRecord): void {
    const i = this.s.activities.indexOf(rec);
    if (i >= 0) this.s.activities.splice(i, 1);
  }

  private activityStartedEvent(rec: ActivityRecord, identity: string | undefined): number {
    return this.addEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED, {
      scheduledEventId: rec.scheduledEventId,
      identity: identity ?? rec.started?.identity ?? rec.lastWorkerIdentity ?? '',
      requestId: rec.started?.requestId ?? crypto.randomUUID(),
      attempt: rec.attempt,
      lastFailure: decodeB64(Failure, rec.lastFailure),
    });
  }

  completeActivity(rec: ActivityRecord, result: IPayloads | null | undefined, identity: string): void {
    const startedEventId = this.activityStartedEvent(rec, identity);
    this.removeActivity(rec);
    this.addExternalEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, {
      result: result ?? undefined,
      scheduledEventId: rec.scheduledEventId,
      startedEventId,
      identity,
    });
  }

  cancelActivityByWorker(rec: ActivityRecord, details: IPayloads | null | undefined, identity: string): void {
    const startedEventId = this.activityStartedEvent(rec, identity);
    this.removeActivity(rec);
    this.addExternalEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED, {
      details: details ?? undefined,
      latestCancelRequestedEventId: rec.cancelRequestedEventId ?? 0,
      scheduledEventId: rec.scheduledEventId,
      startedEventId,
      identity,
    });
  }

  /** A worker reported the attempt failed: retry per policy, or record the failure. */
  failActivityAttempt(rec: ActivityRecord, failure: IFailure | null | undefined, identity: string): void {
    const now = this.clock.now();
    const decision = rec.cancelRequested
      ? ({ retry: false, state: RetryState.RETRY_STATE_CANCEL_REQUESTED } as const)
      : decideRetry(rec.retry, rec.attempt, failure, now, this.activityExpiry(rec));
    if (decision.retry) {
      this.scheduleActivityRetry(rec, failure, decision.backoffMs);
      return;
    }
    const startedEventId = this.activityStartedEvent(rec, identity);
    this.removeActivity(rec);
    this.addExternalEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED, {
      failure: failure ?? undefined,
      scheduledEventId: rec.scheduledEventId,
      startedEventId,
      identity,
      retryState: decision.state,
    });
  }

  private activityExpiry(rec: ActivityRecord): number | undefined {
    return rec.scheduleToCloseMs ? rec.firstScheduledTime + rec.scheduleToCloseMs : undefined;
  }

  private scheduleActivityRetry(rec: ActivityRecord, failure: IFailure | null | undefined, backoffMs: number): void {
    const now = this.clock.now();
    rec.attempt++;
    rec.phase = 'backoff';
    rec.nextAttemptAt = now + backoffMs;
    rec.lastFailure = encodeB64(Failure, failure ?? { message: 'unknown failure' });
    rec.lastAttemptCompleteTime = now;
    rec.started = undefined;
  }

  private timeoutActivity(rec: ActivityRecord, timeoutType: number): void {
    const now = this.clock.now();
    const details = decodeB64(Payloads, rec.heartbeatDetails);
    const typeName = enums.TimeoutType[timeoutType].replace('TIMEOUT_TYPE_', '');
    let failure = timeoutFailure(`activity ${typeName} timeout`, timeoutType);
    const decision = rec.cancelRequested
      ? ({ retry: false, state: RetryState.RETRY_STATE_CANCEL_REQUESTED } as const)
      : decideRetry(rec.retry, rec.attempt, failure, now, this.activityExpiry(rec));
    if (decision.retry) {
      this.scheduleActivityRetry(rec, failure, decision.backoffMs);
      return;
    }
    if (
      decision.state === RetryState.RETRY_STATE_TIMEOUT &&
      timeoutType !== TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START &&
      timeoutType !== TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
    ) {
      failure = timeoutFailure(
        'Not enough time to schedule next retry before activity ScheduleToClose timeout, giving up retrying',
        TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
      );
    }
    failure.timeoutFailureInfo!.lastHeartbeatDetails = details;
    failure.cause = decodeB64(Failure, rec.lastFailure);
    const startedEventId = rec.phase === 'started' ? this.activityStartedEvent(rec, undefined) : 0;
    this.removeActivity(rec);
    this.addExternalEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, {
      failure,
      scheduledEventId: rec.scheduledEventId,
      startedEventId,
      retryState: decision.state,
    });
  }

  /** RequestCancelActivityTask: a running attempt is asked to stop; anything else is cancelled at once. */
  requestCancelActivity(rec: ActivityRecord, workflowTaskCompletedEventId: number): void {
    const requestedId = this.appendEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED, {
      scheduledEventId: rec.scheduledEventId,
      workflowTaskCompletedEventId,
    });
    if (rec.phase === 'started') {
      rec.cancelRequested = true;
      rec.cancelRequestedEventId = requestedId;
      return;
    }
    this.removeActivity(rec);
    this.addExternalEvent(EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED, {
      latestCancelRequestedEventId: requestedId,
      scheduledEventId: rec.scheduledEventId,
      startedEventId: 0,
      identity: '',
    });
  }

  // ---------------------------------------------------------------- memo and search attributes

  memoFields(): Record<string, IPayload> {
    return decodeB64(Memo, this.s.memo)?.fields ?? {};
  }

  searchAttributeFields(): Record<string, IPayload> {
    return decodeB64(SearchAttributes, this.s.searchAttributes)?.indexedFields ?? {};
  }

  upsertMemo(upsert: IMemo | null | undefined): void {
    const merged = mergePayloadMap(this.memoFields(), upsert?.fields);
    this.s.memo = Object.keys(merged).length ? encodeB64(Memo, { fields: merged }) : undefined;
  }

  upsertSearchAttributes(upsert: ISearchAttributes | null | undefined): void {
    const merged = mergePayloadMap(this.searchAttributeFields(), upsert?.indexedFields);
    this.s.searchAttributes = Object.keys(merged).length ? encodeB64(SearchAttributes, { indexedFields: merged }) : undefined;
    this.refreshSearchAttributeValues();
  }

  private refreshSearchAttributeValues(): void {
    this.searchAttributeValues = decodeSearchAttributeValues(this.s.searchAttributes);
  }

  // ---------------------------------------------------------------- deadlines

  /** The earliest time anything of this run is due, or undefined. */
  nextDeadline(): number | undefined {
    const s = this.s;
    if (!this.running) return undefined;
    let at = Infinity;
    const consider = (t: number | undefined) => {
      if (t !== undefined && t < at) at = t;
    };
    consider(s.runExpiresAt);
    consider(s.executionExpiresAt);
    consider(s.backoffUntil);
    if (s.wft?.started) consider(s.wft.started.time + s.workflowTaskTimeoutMs);
    else if (s.wft && this.sticky) consider(s.wft.scheduledTime + this.sticky.timeoutMs);
    for (const t of s.timers) consider(t.fireAt);
    for (const a of s.activities) consider(this.activityDeadline(a));
    return at === Infinity ? undefined : at;
  }

  private activityDeadline(a: ActivityRecord): number | undefined {
    let at = Math.min(...activityTimeouts(a).map(([t]) => t));
    if (a.phase === 'backoff') at = Math.min(at, a.nextAttemptAt ?? Infinity);
    return at === Infinity ? undefined : at;
  }

  /**
   * Everything due at `now`: run timeouts, the end of a start delay, a workflow task timeout, fired
   * timers, activity timeouts and retries. Returns true if the run timed out.
   */
  processDeadlines(now: number): 'timedOut' | undefined {
    const s = this.s;
    if (!this.running) return undefined;
    if ((s.runExpiresAt !== undefined && s.runExpiresAt <= now) || (s.executionExpiresAt !== undefined && s.executionExpiresAt <= now)) {
      return 'timedOut';
    }
    if (s.backoffUntil !== undefined && s.backoffUntil <= now) {
      s.backoffUntil = undefined;
      this.needsWorkflowTask = true;
    }
    if (s.wft?.started && s.wft.started.time + s.workflowTaskTimeoutMs <= now) {
      this.failWorkflowTask({ timedOut: true });
    } else if (s.wft && !s.wft.started && this.sticky && s.wft.scheduledTime + this.sticky.timeoutMs <= now) {
      // The sticky worker did not take it in time (gone?): offer it on the normal queue instead.
      this.sticky = undefined;
      this.outbox.push({ kind: 'workflow', seq: s.wft.seq });
    }
    const dueTimers = s.timers.filter((t) => t.fireAt <= now).sort((a, b) => a.fireAt - b.fireAt || a.startedEventId - b.startedEventId);
    for (const t of dueTimers) this.fireTimer(t);
    for (const a of [...s.activities]) {
      const timeout = dueActivityTimeout(a, now);
      if (timeout !== undefined) {
        this.timeoutActivity(a, timeout);
      } else if (a.phase === 'backoff' && (a.nextAttemptAt ?? 0) <= now) {
        a.phase = 'scheduled';
        a.nextAttemptAt = undefined;
        a.attemptScheduledTime = now;
        this.outbox.push({ kind: 'activity', rec: a, attempt: a.attempt });
      }
    }
    return undefined;
  }

  /** Tasks waiting for a worker, which keep skipped time from moving. */
  inFlightCount(): number {
    if (!this.running) return 0;
    let n = this.s.wft ? 1 : 0;
    for (const a of this.s.activities) if (a.phase !== 'backoff') n++;
    return n;
  }

  /**
   * After a restart: nobody holds a task any more, events buffered for a lost task are written,
   * and every task is offered to workers again.
   */
  resumeAfterLoad(): void {
    if (!this.running) return;
    if (this.s.wft) this.s.wft.started = undefined;
    forgetSentUpdates(this);
    for (const a of this.s.activities) {
      a.started = undefined;
      if (a.phase === 'started') a.phase = 'scheduled';
    }
    if (this.s.buffered.length) {
      if (this.s.wft && !this.s.wft.scheduledEventId) this.s.wft.attempt = 1;
      this.flushBuffer();
      this.makeTransientTaskNormal();
      this.needsWorkflowTask = true;
    }
    if (this.s.wft) this.outbox.push({ kind: 'workflow', seq: this.s.wft.seq });
    for (const a of this.s.activities) if (a.phase === 'scheduled') this.outbox.push({ kind: 'activity', rec: a, attempt: a.attempt });
  }

  /** Attributes of this run's WorkflowExecutionStarted event (its first event). */
  startedAttributes(): temporal.api.history.v1.IWorkflowExecutionStartedEventAttributes {
    return decodeEvent(this.history[0]).workflowExecutionStartedEventAttributes ?? {};
  }

  /** Attributes of the close event of a closed run (result, failure, details, retry state). */
  closeEventAttributes(): { result?: IPayloads; failure?: IFailure; details?: IPayloads; retryState?: number } {
    const e = decodeEvent(this.history[this.history.length - 1]);
    return attributesOf(e) ?? {};
  }

  retryPolicyProto() {
    return this.s.retryPolicy ? retryPolicyProto(this.s.retryPolicy) : undefined;
  }
}
