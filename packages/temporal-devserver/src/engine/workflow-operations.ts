/**
 * Client-facing operations on workflows: start (with id reuse and conflict policies, request-id
 * dedupe, start delay), signal, signal-with-start, cancel, terminate and describe.
 */
import crypto from 'node:crypto';
import { decodeEvent, durToMs, enums, msToDur, msToTs, type temporal } from '../proto';
import { invalidArgument, notFound, workflowAlreadyStarted } from '../rpc/errors';
import { ActivityTasks } from './activity-tasks';
import { executionInfo } from './describe';
import type { Engine, Tx } from './engine';
import type { Execution } from './execution';
import type { NamespaceRecord } from './namespaces';
import { cronError } from '../schedules/spec';

type IStartRequest = temporal.api.workflowservice.v1.IStartWorkflowExecutionRequest;
type StartResponse = temporal.api.workflowservice.v1.IStartWorkflowExecutionResponse;
type ISignalWithStartRequest = temporal.api.workflowservice.v1.ISignalWithStartWorkflowExecutionRequest;

const Status = enums.WorkflowExecutionStatus;
const Reuse = enums.WorkflowIdReusePolicy;
const Conflict = enums.WorkflowIdConflictPolicy;
const NORMAL_QUEUE = enums.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;

/** The fields StartWorkflowExecution and SignalWithStartWorkflowExecution share. */
type StartFields = Pick<
  IStartRequest,
  | 'namespace'
  | 'workflowId'
  | 'workflowType'
  | 'taskQueue'
  | 'input'
  | 'workflowExecutionTimeout'
  | 'workflowRunTimeout'
  | 'workflowTaskTimeout'
  | 'identity'
  | 'requestId'
  | 'workflowIdReusePolicy'
  | 'workflowIdConflictPolicy'
  | 'retryPolicy'
  | 'cronSchedule'
  | 'memo'
  | 'searchAttributes'
  | 'header'
  | 'workflowStartDelay'
  | 'userMetadata'
  | 'priority'
>;

type StartDecision = { kind: 'dedupe'; runId: string } | { kind: 'existing'; exec: Execution } | { kind: 'new'; terminate?: Execution };

export class WorkflowOperations {
  constructor(private readonly engine: Engine) {}

  private validateStart(ns: NamespaceRecord, req: StartFields): void {
    if (!req.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    if (!req.workflowType?.name) throw invalidArgument('WorkflowType is not set on request.');
    if (!req.taskQueue?.name) throw invalidArgument('TaskQueue is not set on request.');
    if (req.cronSchedule) {
      const error = cronError(req.cronSchedule);
      if (error) throw invalidArgument(`Invalid CronSchedule: ${error}`);
      if (durToMs(req.workflowStartDelay)) throw invalidArgument('CronSchedule and WorkflowStartDelay may not be used together.');
    }
    for (const d of [req.workflowExecutionTimeout, req.workflowRunTimeout, req.workflowTaskTimeout, req.workflowStartDelay]) {
      if (durToMs(d) < 0) throw invalidArgument('Timeouts and delays must not be negative.');
    }
    this.engine.namespaces.validateSearchAttributes(ns, Object.keys(req.searchAttributes?.indexedFields ?? {}));
  }

  /** What a start with this workflow id must do given its current run, or the error it gets. */
  private decideStart(ns: NamespaceRecord, req: StartFields, signalWithStart: boolean): StartDecision {
    const cur = this.engine.currentRun(ns.name, req.workflowId!);
    if (!cur) return { kind: 'new' };
    if (req.requestId && cur.startRequestId === req.requestId) return { kind: 'dedupe', runId: cur.runId };
    const reuse = req.workflowIdReusePolicy ?? Reuse.WORKFLOW_ID_REUSE_POLICY_UNSPECIFIED;
    if (cur.status === Status.WORKFLOW_EXECUTION_STATUS_RUNNING) {
      let conflict = req.workflowIdConflictPolicy || Conflict.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED;
      if (!conflict) {
        conflict =
          reuse === Reuse.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING
            ? Conflict.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
            : signalWithStart
              ? Conflict.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING
              : Conflict.WORKFLOW_ID_CONFLICT_POLICY_FAIL;
      }
      if (conflict === Conflict.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING) return { kind: 'existing', exec: cur.exec! };
      if (conflict === Conflict.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING) return { kind: 'new', terminate: cur.exec };
      throw workflowAlreadyStarted(req.workflowId!, cur.startRequestId, cur.runId);
    }
    if (
      reuse === Reuse.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE ||
      (reuse === Reuse.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY && cur.status === Status.WORKFLOW_EXECUTION_STATUS_COMPLETED)
    ) {
      throw workflowAlreadyStarted(req.workflowId!, cur.startRequestId, cur.runId);
    }
    return { kind: 'new' };
  }

  private createFromRequest(tx: Tx, ns: NamespaceRecord, req: StartFields): Execution {
    return this.engine.createRun(tx, {
      namespace: ns,
      workflowId: req.workflowId!,
      workflowType: req.workflowType!.name!,
      taskQueue: req.taskQueue!.name!,
      input: req.input,
      header: req.header,
      executionTimeoutMs: durToMs(req.workflowExecutionTimeout),
      runTimeoutMs: durToMs(req.workflowRunTimeout),
      workflowTaskTimeoutMs: durToMs(req.workflowTaskTimeout),
      identity: req.identity ?? '',
      requestId: req.requestId || crypto.randomUUID(),
      retryPolicy: req.retryPolicy,
      memo: req.memo,
      searchAttributes: req.searchAttributes,
      backoffMs: req.cronSchedule ? undefined : durToMs(req.workflowStartDelay),
      cronSchedule: req.cronSchedule,
      userMetadata: req.userMetadata,
      priority: req.priority,
    });
  }

  private terminateForConflict(tx: Tx, exec: Execution | undefined, identity: string): void {
    if (!exec?.running) return;
    tx.touch(exec);
    exec.terminate('terminated by WorkflowIdConflictPolicy TERMINATE_EXISTING', undefined, identity);
  }

  /**
   * Validates a start and makes its workflow id's current run known; `startIn` then decides and
   * starts inside an operation (the caller's, so update-with-start admits its update in the same one).
   */
  async prepareStart(ns: NamespaceRecord, req: IStartRequest): Promise<{ startIn(tx: Tx): StartResponse }> {
    this.validateStart(ns, req);
    await this.engine.prefetchCurrent(ns.name, req.workflowId!);
    return {
      startIn: (tx) => {
        const decision = this.decideStart(ns, req, false);
        if (decision.kind === 'dedupe') return { runId: decision.runId, started: true, status: Status.WORKFLOW_EXECUTION_STATUS_RUNNING };
        if (decision.kind === 'existing') return { runId: decision.exec.s.runId, started: false, status: decision.exec.s.status };
        this.terminateForConflict(tx, decision.terminate, req.identity ?? '');
        const exec = this.createFromRequest(tx, ns, req);
        return { runId: exec.s.runId, started: true, status: Status.WORKFLOW_EXECUTION_STATUS_RUNNING };
      },
    };
  }

  async start(req: IStartRequest): Promise<StartResponse> {
    const prepared = await this.prepareStart(this.engine.namespaces.get(req.namespace), req);
    return this.engine.run((tx) => prepared.startIn(tx));
  }

  async signalWithStart(req: ISignalWithStartRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    this.validateStart(ns, req);
    if (!req.signalName) throw invalidArgument('SignalName is not set on request.');
    await this.engine.prefetchCurrent(ns.name, req.workflowId!);
    return this.engine.run((tx) => {
      const decision = this.decideStart(ns, req, true);
      const signal = (exec: Execution) =>
        exec.signal({ signalName: req.signalName!, input: req.signalInput, identity: req.identity, header: req.header, requestId: req.requestId });
      if (decision.kind === 'dedupe') return { runId: decision.runId, started: true };
      if (decision.kind === 'existing') {
        signal(tx.touch(decision.exec));
        return { runId: decision.exec.s.runId, started: false };
      }
      this.terminateForConflict(tx, decision.terminate, req.identity ?? '');
      const exec = this.createFromRequest(tx, ns, req);
      signal(exec);
      return { runId: exec.s.runId, started: true };
    });
  }

  async signal(req: temporal.api.workflowservice.v1.ISignalWorkflowExecutionRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    if (!req.workflowExecution?.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    if (!req.signalName) throw invalidArgument('SignalName is not set on request.');
    await this.engine.run((tx) => {
      const exec = this.engine.requireRunning(ns.name, req.workflowExecution!.workflowId!, req.workflowExecution!.runId);
      if (exec.hasSignalRequest(req.requestId)) return;
      tx.touch(exec);
      exec.signal({ signalName: req.signalName!, input: req.input, identity: req.identity, header: req.header, requestId: req.requestId });
    });
    return {};
  }

  async requestCancel(req: temporal.api.workflowservice.v1.IRequestCancelWorkflowExecutionRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    if (!req.workflowExecution?.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    await this.engine.run((tx) => {
      const exec = this.engine.requireRunning(ns.name, req.workflowExecution!.workflowId!, req.workflowExecution!.runId);
      if (req.firstExecutionRunId && exec.s.firstRunId !== req.firstExecutionRunId) throw notFound('workflow execution not found');
      tx.touch(exec);
      exec.requestCancel({ cause: req.reason ?? '', identity: req.identity ?? '' });
    });
    return {};
  }

  async terminate(req: temporal.api.workflowservice.v1.ITerminateWorkflowExecutionRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    if (!req.workflowExecution?.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    await this.engine.run((tx) => {
      const exec = this.engine.requireRunning(ns.name, req.workflowExecution!.workflowId!, req.workflowExecution!.runId);
      if (req.firstExecutionRunId && exec.s.firstRunId !== req.firstExecutionRunId) throw notFound('workflow execution not found');
      tx.touch(exec);
      exec.terminate(req.reason ?? '', req.details, req.identity ?? '');
    });
    return {};
  }

  async describe(req: temporal.api.workflowservice.v1.IDescribeWorkflowExecutionRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    if (!req.execution?.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    const exec = await this.engine.readRun(ns.name, req.execution.workflowId, req.execution.runId);
    const s = exec.s;
    const first = decodeEvent(exec.history[0]);
    const W = enums.PendingWorkflowTaskState;
    return {
      executionConfig: {
        taskQueue: { name: s.taskQueue, kind: NORMAL_QUEUE },
        workflowExecutionTimeout: msToDur(s.executionTimeoutMs),
        workflowRunTimeout: msToDur(s.runTimeoutMs),
        defaultWorkflowTaskTimeout: msToDur(s.workflowTaskTimeoutMs),
        userMetadata: first.userMetadata ?? undefined,
      },
      workflowExecutionInfo: executionInfo(s),
      pendingActivities: s.activities.map((a) => ActivityTasks.pendingInfo(a)),
      pendingChildren: s.children
        .filter((c) => c.runId)
        .map((c) => ({
          workflowId: c.workflowId,
          runId: c.runId,
          workflowTypeName: c.workflowType,
          initiatedId: c.initiatedEventId,
          parentClosePolicy: c.parentClosePolicy,
        })),
      pendingWorkflowTask: s.wft
        ? {
            state: s.wft.started ? W.PENDING_WORKFLOW_TASK_STATE_STARTED : W.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
            scheduledTime: msToTs(s.wft.scheduledTime),
            originalScheduledTime: msToTs(s.wft.originalScheduledTime),
            startedTime: s.wft.started ? msToTs(s.wft.started.time) : undefined,
            attempt: s.wft.attempt,
          }
        : undefined,
      workflowExtendedInfo: {
        executionExpirationTime: s.executionExpiresAt ? msToTs(s.executionExpiresAt) : undefined,
        runExpirationTime: s.runExpiresAt ? msToTs(s.runExpiresAt) : undefined,
        cancelRequested: s.cancelRequested,
        originalStartTime: msToTs(s.startTime),
      },
    };
  }
}
