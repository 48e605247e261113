/**
 * Applying a workflow task completion: every command is validated first (a half-applied completion
 * would corrupt the history), then applied in order, then the effects on other runs (child starts,
 * external signals and cancellations) follow, as Temporal's transfer tasks would.
 */
import crypto from 'node:crypto';
import { durToMs, enums, msToDur, msToDurAlways, num, type temporal, type IFailure } from '../proto';
import { retryPolicyProto, normalizeRetryPolicy, decideRetry } from './retry-policy';
import { EventType } from './history';
import type { Engine, Tx } from './engine';
import type { Execution } from './execution';
import type { ActivityRecord, ChildRecord } from './state';
import { hasUndeliveredUpdates, UpdateAnswers } from './updates';
import { cronError } from '../schedules/spec';

type ICommand = temporal.api.command.v1.ICommand;
type ICompleteRequest = temporal.api.workflowservice.v1.IRespondWorkflowTaskCompletedRequest;

const CT = enums.CommandType;
const Cause = enums.WorkflowTaskFailedCause;
const Status = enums.WorkflowExecutionStatus;
const NORMAL_QUEUE = enums.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;

export interface BadCompletion {
  cause: number;
  message: string;
}

interface ActivityTimeouts {
  scheduleToCloseMs: number;
  scheduleToStartMs: number;
  startToCloseMs: number;
  heartbeatMs: number;
}

const TERMINAL = new Set<number>([
  CT.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
  CT.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION,
  CT.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION,
  CT.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION,
]);

/** Fills activity timeouts the way the server does: everything bounded by schedule-to-close (or the run timeout). */
export function activityTimeouts(a: temporal.api.command.v1.IScheduleActivityTaskCommandAttributes, runTimeoutMs: number): ActivityTimeouts | undefined {
  let s2c = durToMs(a.scheduleToCloseTimeout);
  let s2s = durToMs(a.scheduleToStartTimeout);
  let stc = durToMs(a.startToCloseTimeout);
  let hb = durToMs(a.heartbeatTimeout);
  if (!s2c && !stc) return undefined;
  if (runTimeoutMs && (!s2c || s2c > runTimeoutMs)) s2c = runTimeoutMs;
  if (s2c) {
    if (!s2s || s2s > s2c) s2s = s2c;
    if (!stc || stc > s2c) stc = s2c;
  }
  if (hb > stc) hb = stc;
  return { scheduleToCloseMs: s2c, scheduleToStartMs: s2s, startToCloseMs: stc, heartbeatMs: hb };
}

export class WorkflowTaskCompletion {
  private readonly commands: ICommand[];
  /** Work on other runs, done after every command of this completion is in the history. */
  private readonly deferred: (() => void)[] = [];
  /** Activities the completing worker asked to run itself (eager dispatch, saves a poll). */
  readonly eagerActivities: ActivityRecord[] = [];
  /** The workflow's answers to updates (protocol messages), applied where their commands stand. */
  private readonly updateAnswers: UpdateAnswers;

  constructor(
    private readonly engine: Engine,
    private readonly exec: Execution,
    private readonly req: ICompleteRequest,
  ) {
    this.commands = req.commands ?? [];
    this.updateAnswers = new UpdateAnswers(exec, req.messages ?? []);
  }

  /** Workflow ids of children this completion starts, so their current runs can be prefetched. */
  childWorkflowIds(): { namespace: string; workflowId: string }[] {
    return this.commands
      .filter((c) => c.commandType === CT.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION)
      .map((c) => ({
        namespace: c.startChildWorkflowExecutionCommandAttributes?.namespace || this.exec.s.namespace,
        workflowId: c.startChildWorkflowExecutionCommandAttributes?.workflowId ?? '',
      }));
  }

  /** Checks every command against the run's current state; nothing is changed. */
  validate(): BadCompletion | undefined {
    const s = this.exec.s;
    const ns = this.engine.namespaces.get(s.namespace);
    const activityIds = new Set(s.activities.map((a) => a.activityId));
    const timerIds = new Set(s.timers.map((t) => t.timerId));
    const bad = (cause: number, message: string): BadCompletion => ({ cause, message });
    for (let i = 0; i < this.commands.length; i++) {
      const c = this.commands[i];
      const type = c.commandType ?? 0;
      if (TERMINAL.has(type)) {
        if (i !== this.commands.length - 1) {
          return bad(
            Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_COMPLETE_WORKFLOW_EXECUTION_ATTRIBUTES,
            'invalid command sequence: a workflow completion must be the last command',
          );
        }
        // Events and updates that arrived during the task must be seen before the workflow may close.
        if (this.exec.hasBufferedEvents) return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND, 'UnhandledCommand');
        if (hasUndeliveredUpdates(this.exec)) return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE, 'UnhandledUpdate');
      }
      switch (type) {
        case CT.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK: {
          const a = c.scheduleActivityTaskCommandAttributes;
          const cause = Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES;
          if (!a) return bad(cause, 'ScheduleActivityTaskCommandAttributes is not set on command.');
          if (!a.activityId) return bad(cause, 'ActivityId is not set on command.');
          if (!a.activityType?.name) return bad(cause, 'ActivityType is not set on command.');
          if (activityIds.has(a.activityId)) {
            return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_SCHEDULE_ACTIVITY_DUPLICATE_ID, `Activity ID ${a.activityId} already used.`);
          }
          if (!activityTimeouts(a, s.runTimeoutMs)) {
            return bad(cause, 'A valid StartToClose or ScheduleToCloseTimeout is not set on command.');
          }
          activityIds.add(a.activityId);
          break;
        }
        case CT.COMMAND_TYPE_REQUEST_CANCEL_ACTIVITY_TASK: {
          const id = num(c.requestCancelActivityTaskCommandAttributes?.scheduledEventId);
          if (!this.exec.activityByScheduledId(id)) {
            return bad(
              Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_ACTIVITY_ATTRIBUTES,
              `invalid history builder state for action: request cancel activity, scheduled event ID ${id}`,
            );
          }
          break;
        }
        case CT.COMMAND_TYPE_START_TIMER: {
          const a = c.startTimerCommandAttributes;
          if (!a?.timerId) return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES, 'TimerId is not set on command.');
          if (durToMs(a.startToFireTimeout) < 0)
            return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_TIMER_ATTRIBUTES, 'An invalid StartToFireTimeout is set on command.');
          if (timerIds.has(a.timerId)) return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_START_TIMER_DUPLICATE_ID, `Timer ID ${a.timerId} already used.`);
          timerIds.add(a.timerId);
          break;
        }
        case CT.COMMAND_TYPE_CANCEL_TIMER: {
          const id = c.cancelTimerCommandAttributes?.timerId ?? '';
          if (!timerIds.has(id)) return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CANCEL_TIMER_ATTRIBUTES, `Timer ID ${id} does not exist.`);
          timerIds.delete(id);
          break;
        }
        case CT.COMMAND_TYPE_RECORD_MARKER:
          if (!c.recordMarkerCommandAttributes?.markerName) {
            return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_RECORD_MARKER_ATTRIBUTES, 'MarkerName is not set on command.');
          }
          break;
        case CT.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        case CT.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION:
        case CT.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION: {
          const sa =
            c.upsertWorkflowSearchAttributesCommandAttributes?.searchAttributes ??
            c.continueAsNewWorkflowExecutionCommandAttributes?.searchAttributes ??
            c.startChildWorkflowExecutionCommandAttributes?.searchAttributes;
          const names = Object.keys(sa?.indexedFields ?? {});
          const unknown = names.find((n) => this.engine.namespaces.attributeType(ns, n) === undefined);
          if (unknown) return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES, `search attribute ${unknown} is not defined`);
          if (type === CT.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION) {
            const a = c.startChildWorkflowExecutionCommandAttributes!;
            const cause = Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_START_CHILD_EXECUTION_ATTRIBUTES;
            if (!a.workflowId) return bad(cause, 'Required field WorkflowId is not set on command.');
            if (!a.workflowType?.name) return bad(cause, 'Required field WorkflowType is not set on command.');
            if (a.cronSchedule && cronError(a.cronSchedule)) return bad(cause, `Invalid CronSchedule: ${cronError(a.cronSchedule)}`);
          }
          const canCron = c.continueAsNewWorkflowExecutionCommandAttributes?.cronSchedule;
          if (type === CT.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION && canCron && cronError(canCron)) {
            return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_CONTINUE_AS_NEW_ATTRIBUTES, `Invalid CronSchedule: ${cronError(canCron)}`);
          }
          break;
        }
        case CT.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION: {
          const a = c.signalExternalWorkflowExecutionCommandAttributes;
          const cause = Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SIGNAL_WORKFLOW_EXECUTION_ATTRIBUTES;
          if (!a?.execution?.workflowId) return bad(cause, 'WorkflowId is not set on command.');
          if (!a.signalName) return bad(cause, 'SignalName is not set on command.');
          break;
        }
        case CT.COMMAND_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION:
          if (!c.requestCancelExternalWorkflowExecutionCommandAttributes?.workflowId) {
            return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_ATTRIBUTES, 'WorkflowId is not set on command.');
          }
          break;
        case CT.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION:
        case CT.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION:
        case CT.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION:
        case CT.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES:
        case CT.COMMAND_TYPE_PROTOCOL_MESSAGE:
          break;
        case CT.COMMAND_TYPE_SCHEDULE_NEXUS_OPERATION:
        case CT.COMMAND_TYPE_REQUEST_CANCEL_NEXUS_OPERATION:
          return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_FEATURE_DISABLED, 'Nexus operations are not supported by the dev server');
        default:
          return bad(Cause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND, `unknown command type ${type}`);
      }
    }
    return this.updateAnswers.validate(this.commands);
  }

  /** Writes the completion and every command into the history; `validate` must have passed. */
  apply(tx: Tx): void {
    const exec = this.exec;
    const req = this.req;
    const completedId = exec.beginWorkflowTaskCompletion({
      identity: req.identity ?? '',
      binaryChecksum: req.binaryChecksum ?? '',
      sdkMetadata: req.sdkMetadata,
      meteringMetadata: req.meteringMetadata,
      workerVersion: req.workerVersionStamp,
    });
    for (const c of this.commands) this.applyCommand(c, completedId, tx);
    this.updateAnswers.applyRest();
    for (const effect of this.deferred) effect();
    if (req.forceCreateNewWorkflowTask && exec.running) exec.needsWorkflowTask = true;
  }

  private applyCommand(c: ICommand, completedId: number, tx: Tx): void {
    const exec = this.exec;
    const s = exec.s;
    const now = this.engine.timers.now();
    const identity = this.req.identity ?? '';
    switch (c.commandType) {
      case CT.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK: {
        const a = c.scheduleActivityTaskCommandAttributes!;
        const t = activityTimeouts(a, s.runTimeoutMs)!;
        const retry = normalizeRetryPolicy(a.retryPolicy);
        const taskQueue = a.taskQueue?.name || s.taskQueue;
        const scheduledEventId = exec.appendEvent(
          EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
          {
            activityId: a.activityId,
            activityType: a.activityType,
            taskQueue: { name: taskQueue, kind: NORMAL_QUEUE },
            header: a.header ?? undefined,
            input: a.input ?? undefined,
            scheduleToCloseTimeout: msToDurAlways(t.scheduleToCloseMs),
            scheduleToStartTimeout: msToDurAlways(t.scheduleToStartMs),
            startToCloseTimeout: msToDurAlways(t.startToCloseMs),
            heartbeatTimeout: msToDurAlways(t.heartbeatMs),
            workflowTaskCompletedEventId: completedId,
            retryPolicy: retryPolicyProto(retry),
            useWorkflowBuildId: a.useWorkflowBuildId ?? false,
            priority: a.priority ?? undefined,
          },
          c.userMetadata ? { userMetadata: c.userMetadata } : undefined,
        );
        const rec: ActivityRecord = {
          scheduledEventId,
          activityId: a.activityId!,
          activityType: a.activityType!.name!,
          taskQueue,
          attempt: 1,
          phase: 'scheduled',
          firstScheduledTime: now,
          attemptScheduledTime: now,
          ...t,
          retry,
        };
        exec.addActivity(rec);
        if (a.requestEagerExecution && taskQueue === s.taskQueue) this.eagerActivities.push(rec);
        break;
      }
      case CT.COMMAND_TYPE_REQUEST_CANCEL_ACTIVITY_TASK: {
        const rec = exec.activityByScheduledId(num(c.requestCancelActivityTaskCommandAttributes!.scheduledEventId))!;
        exec.requestCancelActivity(rec, completedId);
        break;
      }
      case CT.COMMAND_TYPE_START_TIMER: {
        const a = c.startTimerCommandAttributes!;
        exec.startTimer(a.timerId!, durToMs(a.startToFireTimeout), completedId, c.userMetadata);
        break;
      }
      case CT.COMMAND_TYPE_CANCEL_TIMER:
        exec.cancelTimer(c.cancelTimerCommandAttributes!.timerId!, completedId, identity);
        break;
      case CT.COMMAND_TYPE_RECORD_MARKER: {
        const a = c.recordMarkerCommandAttributes!;
        exec.appendEvent(EventType.EVENT_TYPE_MARKER_RECORDED, {
          markerName: a.markerName,
          details: a.details ?? undefined,
          workflowTaskCompletedEventId: completedId,
          header: a.header ?? undefined,
          failure: a.failure ?? undefined,
        });
        break;
      }
      case CT.COMMAND_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES: {
        const sa = c.upsertWorkflowSearchAttributesCommandAttributes!.searchAttributes;
        exec.appendEvent(EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, {
          workflowTaskCompletedEventId: completedId,
          searchAttributes: sa ?? undefined,
        });
        exec.upsertSearchAttributes({ indexedFields: this.engine.namespaces.withTypes(this.engine.namespaces.get(s.namespace), sa?.indexedFields) });
        break;
      }
      case CT.COMMAND_TYPE_MODIFY_WORKFLOW_PROPERTIES: {
        const memo = c.modifyWorkflowPropertiesCommandAttributes?.upsertedMemo;
        exec.appendEvent(EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED, {
          workflowTaskCompletedEventId: completedId,
          upsertedMemo: memo ?? undefined,
        });
        exec.upsertMemo(memo);
        break;
      }
      case CT.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION: {
        const result = c.completeWorkflowExecutionCommandAttributes?.result;
        const next = this.engine.cronNext(exec);
        exec.close(
          Status.WORKFLOW_EXECUTION_STATUS_COMPLETED,
          EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
          { result: result ?? undefined, workflowTaskCompletedEventId: completedId, newExecutionRunId: next?.runId },
          false,
        );
        if (next) this.engine.cronRun(tx, exec, next, { result });
        break;
      }
      case CT.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION:
        this.failWorkflow(c.failWorkflowExecutionCommandAttributes?.failure, completedId, tx);
        break;
      case CT.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION:
        exec.close(
          Status.WORKFLOW_EXECUTION_STATUS_CANCELED,
          EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
          { workflowTaskCompletedEventId: completedId, details: c.cancelWorkflowExecutionCommandAttributes?.details ?? undefined },
          false,
        );
        break;
      case CT.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION:
        this.continueAsNew(c.continueAsNewWorkflowExecutionCommandAttributes!, completedId, tx);
        break;
      case CT.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION:
        this.signalExternal(c.signalExternalWorkflowExecutionCommandAttributes!, completedId, tx);
        break;
      case CT.COMMAND_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION:
        this.cancelExternal(c.requestCancelExternalWorkflowExecutionCommandAttributes!, completedId, tx);
        break;
      case CT.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION:
        this.startChild(c.startChildWorkflowExecutionCommandAttributes!, completedId, tx);
        break;
      case CT.COMMAND_TYPE_PROTOCOL_MESSAGE:
        this.updateAnswers.applyCommand(c);
        break;
    }
  }

  private failWorkflow(failure: IFailure | null | undefined, completedId: number, tx: Tx): void {
    const exec = this.exec;
    const s = exec.s;
    const decision = decideRetry(s.retryPolicy, s.attempt, failure, this.engine.timers.now(), s.executionExpiresAt);
    // A cron workflow that fails (retries exhausted) still runs again at its next time.
    const next = decision.retry ? { runId: crypto.randomUUID(), backoffMs: decision.backoffMs } : this.engine.cronNext(exec);
    exec.close(
      Status.WORKFLOW_EXECUTION_STATUS_FAILED,
      EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
      {
        failure: failure ?? undefined,
        retryState: decision.retry ? enums.RetryState.RETRY_STATE_IN_PROGRESS : decision.state,
        workflowTaskCompletedEventId: completedId,
        newExecutionRunId: next?.runId,
      },
      false,
    );
    if (decision.retry) this.engine.retryRun(tx, exec, next!.runId, next!.backoffMs, failure);
    else if (next) this.engine.cronRun(tx, exec, next, { failure });
  }

  private continueAsNew(a: temporal.api.command.v1.IContinueAsNewWorkflowExecutionCommandAttributes, completedId: number, tx: Tx): void {
    const exec = this.exec;
    const s = exec.s;
    const newRunId = crypto.randomUUID();
    const started = exec.startedAttributes();
    const workflowType = a.workflowType?.name || s.workflowType;
    const taskQueue = a.taskQueue?.name || s.taskQueue;
    const runTimeoutMs = durToMs(a.workflowRunTimeout) || s.runTimeoutMs;
    const wftTimeoutMs = durToMs(a.workflowTaskTimeout) || s.workflowTaskTimeoutMs;
    const backoffMs = durToMs(a.backoffStartInterval);
    const memo = a.memo ?? { fields: exec.memoFields() };
    const searchAttributes = a.searchAttributes ?? { indexedFields: exec.searchAttributeFields() };
    s.newRunId = newRunId;
    exec.close(
      Status.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
      EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
      {
        newExecutionRunId: newRunId,
        workflowType: { name: workflowType },
        taskQueue: { name: taskQueue, kind: NORMAL_QUEUE },
        input: a.input ?? undefined,
        workflowRunTimeout: msToDur(runTimeoutMs),
        workflowTaskTimeout: msToDur(wftTimeoutMs),
        workflowTaskCompletedEventId: completedId,
        backoffStartInterval: msToDur(backoffMs),
        initiator: a.initiator ?? enums.ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW,
        failure: a.failure ?? undefined,
        lastCompletionResult: a.lastCompletionResult ?? undefined,
        header: a.header ?? undefined,
        memo,
        searchAttributes,
      },
      false,
    );
    this.engine.createRun(tx, {
      namespace: this.engine.namespaces.get(s.namespace),
      workflowId: s.workflowId,
      runId: newRunId,
      firstRunId: s.firstRunId,
      workflowType,
      taskQueue,
      input: a.input,
      header: a.header,
      executionTimeoutMs: s.executionTimeoutMs,
      runTimeoutMs,
      workflowTaskTimeoutMs: wftTimeoutMs,
      identity: this.req.identity ?? '',
      requestId: crypto.randomUUID(),
      retryPolicy: a.retryPolicy ?? started.retryPolicy,
      memo,
      searchAttributes,
      parent: s.parent,
      root: s.root,
      continuedExecutionRunId: s.runId,
      initiator: a.initiator ?? enums.ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW,
      continuedFailure: a.failure,
      lastCompletionResult: a.lastCompletionResult,
      backoffMs,
      executionExpiresAt: s.executionExpiresAt,
      cronSchedule: a.cronSchedule || s.cronSchedule,
    });
  }

  private targetNamespace(name: string | null | undefined): { name: string; id: string } | undefined {
    const n = name || this.exec.s.namespace;
    return this.engine.namespaces.has(n) ? { name: n, id: this.engine.namespaces.get(n).id } : undefined;
  }

  private signalExternal(a: temporal.api.command.v1.ISignalExternalWorkflowExecutionCommandAttributes, completedId: number, tx: Tx): void {
    const source = this.exec;
    const ns = this.targetNamespace(a.namespace);
    const target = { workflowId: a.execution!.workflowId!, runId: a.execution!.runId ?? '' };
    const initiatedEventId = source.appendEvent(EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, {
      workflowTaskCompletedEventId: completedId,
      namespace: ns?.name ?? a.namespace,
      namespaceId: ns?.id,
      workflowExecution: target,
      signalName: a.signalName,
      input: a.input ?? undefined,
      control: a.control ?? '',
      childWorkflowOnly: a.childWorkflowOnly ?? false,
      header: a.header ?? undefined,
    });
    this.deferred.push(() => {
      const dest = ns ? this.findTarget(ns.name, target.workflowId, target.runId, !!a.childWorkflowOnly) : undefined;
      if (!dest) {
        if (source.running) {
          source.addExternalEvent(EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED, {
            cause: ns
              ? enums.SignalExternalWorkflowExecutionFailedCause.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND
              : enums.SignalExternalWorkflowExecutionFailedCause.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_NAMESPACE_NOT_FOUND,
            workflowTaskCompletedEventId: completedId,
            namespace: ns?.name ?? a.namespace,
            namespaceId: ns?.id,
            workflowExecution: target,
            initiatedEventId,
            control: a.control ?? '',
          });
        }
        return;
      }
      tx.touch(dest);
      dest.signal({
        signalName: a.signalName!,
        input: a.input,
        header: a.header,
        identity: this.req.identity ?? '',
        requestId: crypto.randomUUID(),
        externalWorkflowExecution: { workflowId: source.s.workflowId, runId: source.s.runId },
      });
      if (source.running) {
        source.addExternalEvent(EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED, {
          initiatedEventId,
          namespace: ns!.name,
          namespaceId: ns!.id,
          workflowExecution: { workflowId: dest.s.workflowId, runId: dest.s.runId },
          control: a.control ?? '',
        });
      }
    });
  }

  private cancelExternal(a: temporal.api.command.v1.IRequestCancelExternalWorkflowExecutionCommandAttributes, completedId: number, tx: Tx): void {
    const source = this.exec;
    const ns = this.targetNamespace(a.namespace);
    const target = { workflowId: a.workflowId!, runId: a.runId ?? '' };
    const initiatedEventId = source.appendEvent(EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED, {
      workflowTaskCompletedEventId: completedId,
      namespace: ns?.name ?? a.namespace,
      namespaceId: ns?.id,
      workflowExecution: target,
      control: a.control ?? '',
      childWorkflowOnly: a.childWorkflowOnly ?? false,
      reason: a.reason ?? '',
    });
    this.deferred.push(() => {
      const dest = ns ? this.findTarget(ns.name, target.workflowId, target.runId, !!a.childWorkflowOnly) : undefined;
      if (!dest) {
        if (source.running) {
          source.addExternalEvent(EventType.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED, {
            cause: ns
              ? enums.CancelExternalWorkflowExecutionFailedCause.CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND
              : enums.CancelExternalWorkflowExecutionFailedCause.CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_NAMESPACE_NOT_FOUND,
            workflowTaskCompletedEventId: completedId,
            namespace: ns?.name ?? a.namespace,
            namespaceId: ns?.id,
            workflowExecution: target,
            initiatedEventId,
            control: a.control ?? '',
          });
        }
        return;
      }
      tx.touch(dest);
      dest.requestCancel({
        cause: a.reason ?? '',
        identity: this.req.identity ?? '',
        externalInitiatedEventId: initiatedEventId,
        externalWorkflowExecution: { workflowId: source.s.workflowId, runId: source.s.runId },
      });
      if (source.running) {
        source.addExternalEvent(EventType.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED, {
          initiatedEventId,
          namespace: ns!.name,
          namespaceId: ns!.id,
          workflowExecution: { workflowId: dest.s.workflowId, runId: dest.s.runId },
        });
      }
    });
  }

  /** The running run a signal or cancellation is addressed to, if there is one. */
  private findTarget(namespace: string, workflowId: string, runId: string, childOnly: boolean): Execution | undefined {
    const dest = runId ? this.engine.execution(namespace, runId) : this.engine.currentExecution(namespace, workflowId);
    if (!dest?.running || dest.s.workflowId !== workflowId) return undefined;
    if (childOnly && dest.s.parent?.runId !== this.exec.s.runId) return undefined;
    return dest;
  }

  private startChild(a: temporal.api.command.v1.IStartChildWorkflowExecutionCommandAttributes, completedId: number, tx: Tx): void {
    const parent = this.exec;
    const ps = parent.s;
    const ns = this.targetNamespace(a.namespace);
    const taskQueue = a.taskQueue?.name || ps.taskQueue;
    const parentClosePolicy = a.parentClosePolicy || enums.ParentClosePolicy.PARENT_CLOSE_POLICY_TERMINATE;
    const initiatedEventId = parent.appendEvent(
      EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
      {
        namespace: ns?.name ?? a.namespace,
        namespaceId: ns?.id,
        workflowId: a.workflowId,
        workflowType: a.workflowType,
        taskQueue: { name: taskQueue, kind: NORMAL_QUEUE },
        input: a.input ?? undefined,
        workflowExecutionTimeout: a.workflowExecutionTimeout ?? undefined,
        workflowRunTimeout: a.workflowRunTimeout ?? undefined,
        workflowTaskTimeout: a.workflowTaskTimeout ?? undefined,
        parentClosePolicy,
        control: a.control ?? '',
        workflowTaskCompletedEventId: completedId,
        workflowIdReusePolicy: a.workflowIdReusePolicy ?? 0,
        retryPolicy: a.retryPolicy ?? undefined,
        cronSchedule: a.cronSchedule ?? undefined,
        header: a.header ?? undefined,
        memo: a.memo ?? undefined,
        searchAttributes: a.searchAttributes ?? undefined,
        priority: a.priority ?? undefined,
      },
      undefined,
    );
    const record: ChildRecord = {
      initiatedEventId,
      namespace: ns?.name ?? a.namespace ?? '',
      workflowId: a.workflowId!,
      runId: '',
      workflowType: a.workflowType!.name!,
      parentClosePolicy,
      startedEventId: 0,
    };
    ps.children.push(record);
    this.deferred.push(() => {
      const fail = (cause: number) => {
        ps.children.splice(ps.children.indexOf(record), 1);
        if (!parent.running) return;
        parent.addExternalEvent(EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED, {
          namespace: ns?.name ?? a.namespace,
          namespaceId: ns?.id,
          workflowId: a.workflowId,
          workflowType: a.workflowType,
          cause,
          control: a.control ?? '',
          initiatedEventId,
          workflowTaskCompletedEventId: completedId,
        });
      };
      if (!ns) return fail(enums.StartChildWorkflowExecutionFailedCause.START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_NAMESPACE_NOT_FOUND);
      const existing = this.engine.currentRun(ns.name, a.workflowId!);
      const reuse = a.workflowIdReusePolicy ?? 0;
      const P = enums.WorkflowIdReusePolicy;
      if (
        existing &&
        (existing.status === Status.WORKFLOW_EXECUTION_STATUS_RUNNING ||
          reuse === P.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE ||
          (reuse === P.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY && existing.status === Status.WORKFLOW_EXECUTION_STATUS_COMPLETED))
      ) {
        return fail(enums.StartChildWorkflowExecutionFailedCause.START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_WORKFLOW_ALREADY_EXISTS);
      }
      const child = this.engine.createRun(tx, {
        namespace: this.engine.namespaces.get(ns.name),
        workflowId: a.workflowId!,
        workflowType: a.workflowType!.name!,
        taskQueue,
        input: a.input,
        header: a.header,
        executionTimeoutMs: durToMs(a.workflowExecutionTimeout),
        runTimeoutMs: durToMs(a.workflowRunTimeout),
        workflowTaskTimeoutMs: durToMs(a.workflowTaskTimeout),
        identity: this.req.identity ?? '',
        requestId: crypto.randomUUID(),
        retryPolicy: a.retryPolicy,
        memo: a.memo,
        searchAttributes: a.searchAttributes,
        parent: { namespace: ps.namespace, workflowId: ps.workflowId, runId: ps.runId, initiatedEventId },
        root: ps.root ?? { workflowId: ps.workflowId, runId: ps.runId },
        priority: a.priority,
        cronSchedule: a.cronSchedule,
      });
      record.runId = child.s.runId;
      if (!parent.running) return;
      const startedId = parent.addExternalEvent(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, {
        namespace: ns.name,
        namespaceId: ns.id,
        initiatedEventId,
        workflowExecution: { workflowId: child.s.workflowId, runId: child.s.runId },
        workflowType: a.workflowType,
        header: a.header ?? undefined,
      });
      if (startedId) record.startedEventId = startedId;
    });
  }
}
