/**
 * The engine: every run, the registry of current runs per workflow id, and the operation cycle
 * that keeps memory, storage and workers in step:
 *
 *   1. mutate runs synchronously (no other operation interleaves);
 *   2. settle: schedule workflow tasks the changes call for, apply close effects (parents,
 *      children), snapshot what changed;
 *   3. persist the snapshot (durable mode) — the caller's RPC answers only after this;
 *   4. publish: hand new tasks to matching, wake long polls, move timers.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import {
  encodeB64,
  enums,
  Memo,
  SearchAttributes,
  type IFailure,
  type IHeader,
  type IMemo,
  type IPayloads,
  type IRetryPolicy,
  type ISearchAttributes,
  msToDur,
  msToTs,
  decodeEvent,
  tsToMs,
} from '../proto';
import { notFound, workflowCompleted } from '../rpc/errors';
import type { CommitBatch, CurrentRunInfo, ScheduleWrite, Store } from '../persistence/store';
import { visibilityRow } from './describe';
import { Execution, mergePayloadMap, type ExecutionHost, type OutboxTask } from './execution';
import { EventType } from './history';
import { Matching } from './matching';
import { type NamespaceRecord, NamespaceRegistry } from './namespaces';
import { normalizeRetryPolicy, decideRetry } from './retry-policy';
import { type ExecutionRecord, type ParentRef, STATE_VERSION } from './state';
import type { TimerQueue } from './timer-queue';
import { abortUpdates } from './updates';
import { cronBackoff } from '../schedules/spec';

const Status = enums.WorkflowExecutionStatus;
const NORMAL_QUEUE = enums.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;

const DEFAULT_WORKFLOW_TASK_TIMEOUT_MS = 10_000;
const MAX_WORKFLOW_TASK_TIMEOUT_MS = 120_000;

/** The changes of one operation, settled and published together. */
export class Tx {
  readonly touched = new Set<Execution>();
  readonly currentRuns: CommitBatch['currentRuns'] = [];
  readonly tasks: { exec: Execution; task: OutboxTask }[] = [];
  /** Schedules this operation changed, written with it. */
  readonly schedules: ScheduleWrite[] = [];

  touch(exec: Execution): Execution {
    this.touched.add(exec);
    return exec;
  }
}

export interface NewRun {
  namespace: NamespaceRecord;
  workflowId: string;
  runId?: string;
  firstRunId?: string;
  workflowType: string;
  taskQueue: string;
  input?: IPayloads | null;
  header?: IHeader | null;
  executionTimeoutMs: number;
  runTimeoutMs: number;
  workflowTaskTimeoutMs: number;
  identity: string;
  requestId: string;
  retryPolicy?: IRetryPolicy | null;
  attempt?: number;
  memo?: IMemo | null;
  searchAttributes?: ISearchAttributes | null;
  parent?: ParentRef;
  root?: { workflowId: string; runId: string };
  continuedExecutionRunId?: string;
  initiator?: number;
  continuedFailure?: IFailure | null;
  lastCompletionResult?: IPayloads | null;
  backoffMs?: number;
  executionExpiresAt?: number;
  userMetadata?: object | null;
  priority?: object | null;
  cronSchedule?: string | null;
}

export interface EngineOptions {
  timers: TimerQueue;
  store?: Store;
  log: Logger;
  namespaces: NamespaceRecord[];
  /** Closed runs kept in memory (the only copy in memory mode, a read cache in durable mode). */
  maxClosedInMemory: number;
}

/** A workflow id's current run, as far as start decisions need it. */
interface CurrentRun extends CurrentRunInfo {
  exec?: Execution;
}

export class Engine implements ExecutionHost {
  readonly timers: TimerQueue;
  readonly store?: Store;
  readonly log: Logger;
  readonly namespaces: NamespaceRegistry;
  readonly matching = new Matching();
  /** Every run in memory: all open runs, plus recently closed ones. Key `namespace/runId`. */
  readonly executions = new Map<string, Execution>();
  /** `namespace/workflowId` -> run id of the current run, for runs in memory. */
  private readonly current = new Map<string, string>();
  /** Current runs found in the store (closed, not in memory), for start decisions. */
  private readonly storedCurrent = new Map<string, CurrentRunInfo>();
  /** Closed runs in memory, oldest first, for eviction. */
  private readonly closedOrder = new Set<Execution>();
  private readonly maxClosedInMemory: number;
  private inFlightTotal = 0;
  private readonly inFlightOf = new WeakMap<Execution, number>();
  /** Hooks other engine parts register to run when a tx is published / when a run closes (inside the tx). */
  readonly onPublish: ((tx: Tx) => void)[] = [];
  readonly onRunClosed: ((exec: Execution, tx: Tx) => void)[] = [];
  /** Dispatches tasks created by operations (set by the workflow-task and activity-task parts). */
  dispatchTask: (exec: Execution, task: OutboxTask) => void = () => {};
  private stopped = false;

  constructor(opts: EngineOptions) {
    this.timers = opts.timers;
    this.store = opts.store;
    this.log = opts.log;
    this.namespaces = new NamespaceRegistry(opts.namespaces);
    this.maxClosedInMemory = opts.maxClosedInMemory;
  }

  get durable(): boolean {
    return !!this.store;
  }

  /** Tasks waiting for workers across all runs (time skipping holds while this is non-zero). */
  inFlight(): number {
    return this.inFlightTotal;
  }

  // ------------------------------------------------------------------ operations

  /**
   * Runs `fn` as one operation: its changes are settled, made durable, then published. Errors
   * thrown by `fn` propagate after whatever it already changed is persisted, so memory and storage
   * never disagree (handlers validate before they change anything).
   */
  async run<T>(fn: (tx: Tx) => T): Promise<T> {
    const tx = new Tx();
    let result: T | undefined;
    let error: unknown;
    try {
      result = fn(tx);
    } catch (err) {
      error = err;
    }
    if (tx.touched.size || tx.schedules.length) {
      const batch = this.settle(tx);
      if (this.store && batch) await this.store.commit(batch);
      this.publish(tx);
    }
    if (error !== undefined) throw error;
    return result as T;
  }

  private settle(tx: Tx): CommitBatch | undefined {
    // Closing a run touches others (parent, children), which may close in turn: iterate to a fixpoint.
    let progressed = true;
    while (progressed) {
      progressed = false;
      for (const exec of [...tx.touched]) {
        if (exec.closedNow) {
          exec.closedNow = false;
          this.onClosed(exec, tx);
          progressed = true;
        }
      }
    }
    const batch: CommitBatch | undefined = this.store ? { executions: [], currentRuns: tx.currentRuns, schedules: tx.schedules } : undefined;
    for (const exec of tx.touched) {
      exec.maybeScheduleWorkflowTask();
      exec.s.stateTransitions++;
      for (const task of exec.outbox) tx.tasks.push({ exec, task });
      exec.outbox = [];
      const firstEventId = exec.s.nextEventId - exec.unpersisted.length;
      if (batch) {
        batch.executions.push({
          state: JSON.stringify(exec.s),
          row: visibilityRow(exec.s, exec.searchAttributeValues),
          startRequestId: exec.s.startRequestId,
          firstEventId,
          events: exec.unpersisted,
        });
      }
      exec.unpersisted = [];
      this.timers.set(exec, exec.nextDeadline());
      this.updateInFlight(exec);
    }
    return batch;
  }

  private publish(tx: Tx): void {
    for (const { exec, task } of tx.tasks) {
      if (exec.running) this.dispatchTask(exec, task);
    }
    for (const exec of tx.touched) {
      if (exec.waiters.size) for (const w of [...exec.waiters]) w();
    }
    for (const hook of this.onPublish) hook(tx);
    this.evictClosed();
    this.timers.poke();
  }

  updateInFlight(exec: Execution): void {
    const n = exec.inFlightCount();
    this.inFlightTotal += n - (this.inFlightOf.get(exec) ?? 0);
    this.inFlightOf.set(exec, n);
  }

  /** Timer queue callback: everything of `exec` due by `now`. */
  onDeadline(exec: Execution, now: number): void {
    if (this.stopped) return;
    this.run((tx) => {
      tx.touch(exec);
      if (exec.processDeadlines(now) === 'timedOut') this.timeOutWorkflow(exec, tx);
    }).catch((err) => this.log.error({ err }, 'processing deadlines failed'));
  }

  // ------------------------------------------------------------------ registry

  private workflowKey(namespace: string, workflowId: string): string {
    return `${namespace}/${workflowId}`;
  }

  execution(namespace: string, runId: string): Execution | undefined {
    return this.executions.get(`${namespace}/${runId}`);
  }

  /** The current run of a workflow id if it is in memory. */
  currentExecution(namespace: string, workflowId: string): Execution | undefined {
    const runId = this.current.get(this.workflowKey(namespace, workflowId));
    return runId ? this.execution(namespace, runId) : undefined;
  }

  /** A running run addressed by id (and optionally run id); NOT_FOUND otherwise. */
  requireRunning(namespace: string, workflowId: string, runId?: string | null): Execution {
    const exec = runId ? this.execution(namespace, runId) : this.currentExecution(namespace, workflowId);
    if (!exec || exec.s.workflowId !== workflowId) {
      throw notFound(`workflow execution not found for workflow ID "${workflowId}" and run ID "${runId ?? ''}"`);
    }
    if (!exec.running) throw workflowCompleted();
    return exec;
  }

  /** Any run, open or closed; closed runs evicted from memory are read back from the store. */
  async readRun(namespace: string, workflowId: string, runId?: string | null): Promise<Execution> {
    let exec = runId ? this.execution(namespace, runId) : this.currentExecution(namespace, workflowId);
    if (!exec && this.store) {
      const rid = runId || (await this.store.currentRun(namespace, workflowId))?.runId;
      if (rid) exec = this.execution(namespace, rid) ?? (await this.loadClosed(namespace, rid));
    }
    if (!exec || exec.s.workflowId !== workflowId) {
      throw notFound(`workflow execution not found for workflow ID "${workflowId}" and run ID "${runId ?? ''}"`);
    }
    return exec;
  }

  private async loadClosed(namespace: string, runId: string): Promise<Execution | undefined> {
    const loaded = await this.store!.loadExecution(namespace, runId);
    if (!loaded) return undefined;
    // Another operation may have loaded it while we waited.
    const again = this.execution(namespace, runId);
    if (again) return again;
    const exec = new Execution(loaded.record, loaded.history, this.timers, this);
    this.executions.set(exec.key, exec);
    if (!exec.running) this.closedOrder.add(exec);
    return exec;
  }

  /**
   * Makes the current run of a workflow id known without I/O for the synchronous part of a start:
   * in durable mode a closed current run may only be in the store.
   */
  async prefetchCurrent(namespace: string, workflowId: string): Promise<void> {
    if (!this.store) return;
    const key = this.workflowKey(namespace, workflowId);
    if (this.current.has(key) || this.storedCurrent.has(key)) return;
    const info = await this.store.currentRun(namespace, workflowId);
    if (info && !this.current.has(key)) {
      this.storedCurrent.set(key, info);
      // Bounded: this cache only bridges the await above and the start that follows.
      if (this.storedCurrent.size > 10_000) this.storedCurrent.delete(this.storedCurrent.keys().next().value!);
    }
  }

  currentRun(namespace: string, workflowId: string): CurrentRun | undefined {
    const exec = this.currentExecution(namespace, workflowId);
    if (exec) return { runId: exec.s.runId, status: exec.s.status, startRequestId: exec.s.startRequestId, exec };
    return this.storedCurrent.get(this.workflowKey(namespace, workflowId));
  }

  // ------------------------------------------------------------------ runs

  /** Creates a run with its WorkflowExecutionStarted event and makes it current. */
  createRun(tx: Tx, p: NewRun): Execution {
    const now = this.timers.now();
    const runId = p.runId ?? crypto.randomUUID();
    // A cron workflow's first run waits for the schedule's first time.
    const backoffMs = p.backoffMs ?? (p.cronSchedule ? (cronBackoff(p.cronSchedule, now) ?? 0) : 0);
    const executionTime = now + backoffMs;
    let runTimeoutMs = p.runTimeoutMs;
    if (p.executionTimeoutMs && (!runTimeoutMs || runTimeoutMs > p.executionTimeoutMs)) runTimeoutMs = p.executionTimeoutMs;
    let wftTimeoutMs = p.workflowTaskTimeoutMs || DEFAULT_WORKFLOW_TASK_TIMEOUT_MS;
    wftTimeoutMs = Math.min(wftTimeoutMs, MAX_WORKFLOW_TASK_TIMEOUT_MS, runTimeoutMs || Infinity);
    const memo = mergePayloadMap(undefined, p.memo?.fields);
    const searchAttributes = mergePayloadMap(undefined, this.namespaces.withTypes(p.namespace, p.searchAttributes?.indexedFields));
    const executionExpiresAt = p.executionExpiresAt ?? (p.executionTimeoutMs ? executionTime + p.executionTimeoutMs : undefined);
    const record: ExecutionRecord = {
      v: STATE_VERSION,
      namespace: p.namespace.name,
      workflowId: p.workflowId,
      runId,
      firstRunId: p.firstRunId ?? runId,
      workflowType: p.workflowType,
      taskQueue: p.taskQueue,
      status: Status.WORKFLOW_EXECUTION_STATUS_RUNNING,
      startTime: now,
      executionTime,
      attempt: p.attempt ?? 1,
      runTimeoutMs,
      executionTimeoutMs: p.executionTimeoutMs,
      workflowTaskTimeoutMs: wftTimeoutMs,
      runExpiresAt: runTimeoutMs ? executionTime + runTimeoutMs : undefined,
      executionExpiresAt,
      startRequestId: p.requestId,
      signalRequestIds: [],
      parent: p.parent,
      root: p.root,
      retryPolicy: p.retryPolicy ? normalizeRetryPolicy(p.retryPolicy) : undefined,
      cronSchedule: p.cronSchedule || undefined,
      memo: Object.keys(memo).length ? encodeB64(Memo, { fields: memo }) : undefined,
      searchAttributes: Object.keys(searchAttributes).length ? encodeB64(SearchAttributes, { indexedFields: searchAttributes }) : undefined,
      nextEventId: 1,
      lastCompletedWftStartedId: 0,
      wftSeq: 0,
      backoffUntil: backoffMs ? executionTime : undefined,
      activities: [],
      timers: [],
      children: [],
      cancelRequested: false,
      buffered: [],
      historySizeBytes: 0,
      stateTransitions: 0,
    };
    const exec = new Execution(record, [], this.timers, this);
    exec.appendEvent(
      EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
      {
        workflowType: { name: p.workflowType },
        parentWorkflowNamespace: p.parent?.namespace,
        parentWorkflowNamespaceId: p.parent ? this.namespaces.get(p.parent.namespace).id : undefined,
        parentWorkflowExecution: p.parent ? { workflowId: p.parent.workflowId, runId: p.parent.runId } : undefined,
        parentInitiatedEventId: p.parent?.initiatedEventId,
        taskQueue: { name: p.taskQueue, kind: NORMAL_QUEUE },
        input: p.input ?? undefined,
        workflowExecutionTimeout: msToDur(p.executionTimeoutMs),
        workflowRunTimeout: msToDur(runTimeoutMs),
        workflowTaskTimeout: msToDur(wftTimeoutMs),
        continuedExecutionRunId: p.continuedExecutionRunId,
        initiator: p.initiator,
        continuedFailure: p.continuedFailure ?? undefined,
        lastCompletionResult: p.lastCompletionResult ?? undefined,
        originalExecutionRunId: runId,
        identity: p.identity,
        firstExecutionRunId: record.firstRunId,
        retryPolicy: exec.retryPolicyProto(),
        attempt: record.attempt,
        workflowExecutionExpirationTime: executionExpiresAt ? msToTs(executionExpiresAt) : undefined,
        firstWorkflowTaskBackoff: msToDur(backoffMs),
        cronSchedule: p.cronSchedule || undefined,
        memo: record.memo ? { fields: memo } : undefined,
        searchAttributes: record.searchAttributes ? { indexedFields: searchAttributes } : undefined,
        header: p.header ?? undefined,
        workflowId: p.workflowId,
        rootWorkflowExecution: p.root ? { workflowId: p.root.workflowId, runId: p.root.runId } : undefined,
        priority: p.priority ?? undefined,
      },
      p.userMetadata ? { userMetadata: p.userMetadata } : undefined,
    );
    exec.needsWorkflowTask = true;
    this.executions.set(exec.key, exec);
    const wkey = this.workflowKey(p.namespace.name, p.workflowId);
    this.current.set(wkey, runId);
    this.storedCurrent.delete(wkey);
    tx.currentRuns.push({ namespace: p.namespace.name, workflowId: p.workflowId, runId });
    tx.touch(exec);
    return exec;
  }

  /** Run/execution timeout: retried per the workflow's retry policy, else closed as timed out. */
  private timeOutWorkflow(exec: Execution, tx: Tx): void {
    const now = this.timers.now();
    const s = exec.s;
    const executionExpired = s.executionExpiresAt !== undefined && s.executionExpiresAt <= now;
    const failure: IFailure = { message: 'workflow timeout', timeoutFailureInfo: { timeoutType: enums.TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE } };
    const decision = executionExpired
      ? ({ retry: false, state: enums.RetryState.RETRY_STATE_TIMEOUT } as const)
      : decideRetry(s.retryPolicy, s.attempt, { message: 'retry on timeout', applicationFailureInfo: {} }, now, s.executionExpiresAt);
    const next = decision.retry ? { runId: crypto.randomUUID(), backoffMs: decision.backoffMs } : this.cronNext(exec);
    exec.close(
      Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
      EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
      { retryState: decision.retry ? enums.RetryState.RETRY_STATE_IN_PROGRESS : decision.state, newExecutionRunId: next?.runId },
      true,
    );
    if (decision.retry) this.retryRun(tx, exec, next!.runId, next!.backoffMs, failure);
    else if (next) this.cronRun(tx, exec, next, { failure });
  }

  /** The next run of a cron workflow closing now (none if it has no schedule or its schedule has no more times). */
  cronNext(exec: Execution): { runId: string; backoffMs: number } | undefined {
    const cron = exec.s.cronSchedule;
    if (!cron) return undefined;
    const backoffMs = cronBackoff(cron, this.timers.now());
    return backoffMs === undefined ? undefined : { runId: crypto.randomUUID(), backoffMs };
  }

  /** Starts a cron workflow's next run, which carries the closed run's result or failure. */
  cronRun(tx: Tx, prev: Execution, next: { runId: string; backoffMs: number }, outcome: { result?: IPayloads | null; failure?: IFailure | null }): Execution {
    return this.nextRun(tx, prev, next.runId, next.backoffMs, {
      initiator: enums.ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE,
      attempt: 1,
      continuedFailure: outcome.failure,
      lastCompletionResult: outcome.result,
    });
  }

  /** Starts the next attempt of a run that failed or timed out under a retry policy. */
  retryRun(tx: Tx, prev: Execution, runId: string, backoffMs: number, failure: IFailure | null | undefined): Execution {
    return this.nextRun(tx, prev, runId, backoffMs, {
      initiator: enums.ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_RETRY,
      attempt: prev.s.attempt + 1,
      continuedFailure: failure,
    });
  }

  /** The run that follows a closed one of the same workflow (retry, cron): same input and settings. */
  private nextRun(
    tx: Tx,
    prev: Execution,
    runId: string,
    backoffMs: number,
    how: { initiator: number; attempt: number; continuedFailure?: IFailure | null; lastCompletionResult?: IPayloads | null },
  ): Execution {
    const s = prev.s;
    s.newRunId = runId;
    const started = prev.startedAttributes();
    return this.createRun(tx, {
      namespace: this.namespaces.get(s.namespace),
      workflowId: s.workflowId,
      runId,
      firstRunId: s.firstRunId,
      workflowType: s.workflowType,
      taskQueue: s.taskQueue,
      input: started.input,
      header: started.header,
      executionTimeoutMs: s.executionTimeoutMs,
      runTimeoutMs: s.runTimeoutMs,
      workflowTaskTimeoutMs: s.workflowTaskTimeoutMs,
      identity: 'history-service',
      requestId: crypto.randomUUID(),
      retryPolicy: started.retryPolicy,
      attempt: how.attempt,
      memo: { fields: prev.memoFields() },
      searchAttributes: { indexedFields: prev.searchAttributeFields() },
      parent: s.parent,
      root: s.root,
      continuedExecutionRunId: s.runId,
      initiator: how.initiator,
      continuedFailure: how.continuedFailure,
      lastCompletionResult: how.lastCompletionResult,
      backoffMs,
      executionExpiresAt: s.executionExpiresAt,
      cronSchedule: s.cronSchedule,
    });
  }

  // ------------------------------------------------------------------ closing

  /** Effects of a run closing on other runs: its parent hears about it, its children follow policy. */
  private onClosed(exec: Execution, tx: Tx): void {
    const s = exec.s;
    this.closedOrder.add(exec);
    const continued = s.status === Status.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW || s.newRunId !== undefined;
    if (s.parent && !continued) this.notifyParent(exec, tx);
    abortUpdates(exec, continued);
    for (const hook of this.onRunClosed) hook(exec, tx);
    for (const child of s.children) {
      const target = this.currentExecution(child.namespace, child.workflowId);
      // The child may have continued as new; its current run still carries the first run id.
      if (!target?.running || target.s.firstRunId !== child.runId) continue;
      if (child.parentClosePolicy === enums.ParentClosePolicy.PARENT_CLOSE_POLICY_ABANDON) continue;
      tx.touch(target);
      if (child.parentClosePolicy === enums.ParentClosePolicy.PARENT_CLOSE_POLICY_REQUEST_CANCEL) {
        target.requestCancel({ cause: 'by parent close policy', identity: 'history-service' });
      } else {
        target.terminate('by parent close policy', undefined, 'history-service');
      }
    }
    s.children = [];
  }

  private notifyParent(exec: Execution, tx: Tx): void {
    const s = exec.s;
    const p = s.parent!;
    const parent = this.execution(p.namespace, p.runId);
    if (!parent?.running) return;
    const child = parent.s.children.find((c) => c.initiatedEventId === p.initiatedEventId);
    if (!child) return;
    parent.s.children.splice(parent.s.children.indexOf(child), 1);
    tx.touch(parent);
    const closeEvent = exec.closeEventAttributes();
    const common = {
      namespace: s.namespace,
      namespaceId: this.namespaces.get(s.namespace).id,
      workflowExecution: { workflowId: s.workflowId, runId: s.runId },
      workflowType: { name: s.workflowType },
      initiatedEventId: p.initiatedEventId,
      startedEventId: child.startedEventId,
    };
    switch (s.status) {
      case Status.WORKFLOW_EXECUTION_STATUS_COMPLETED:
        parent.addExternalEvent(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, { ...common, result: closeEvent.result });
        break;
      case Status.WORKFLOW_EXECUTION_STATUS_FAILED:
        parent.addExternalEvent(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED, {
          ...common,
          failure: closeEvent.failure,
          retryState: closeEvent.retryState,
        });
        break;
      case Status.WORKFLOW_EXECUTION_STATUS_CANCELED:
        parent.addExternalEvent(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED, { ...common, details: closeEvent.details });
        break;
      case Status.WORKFLOW_EXECUTION_STATUS_TERMINATED:
        parent.addExternalEvent(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED, common);
        break;
      case Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
        parent.addExternalEvent(EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT, { ...common, retryState: closeEvent.retryState });
        break;
    }
  }

  /** Drops closed runs beyond the in-memory limit (durable mode keeps them in the store). */
  private evictClosed(): void {
    while (this.closedOrder.size > this.maxClosedInMemory) {
      const exec = this.closedOrder.values().next().value!;
      this.closedOrder.delete(exec);
      this.forget(exec);
    }
  }

  /** Removes a closed run from memory (and, in memory mode, from existence). */
  forget(exec: Execution): void {
    this.closedOrder.delete(exec);
    this.executions.delete(exec.key);
    const wkey = this.workflowKey(exec.s.namespace, exec.s.workflowId);
    if (this.current.get(wkey) === exec.s.runId) this.current.delete(wkey);
    this.timers.cancel(exec);
    this.inFlightTotal -= this.inFlightOf.get(exec) ?? 0;
    this.inFlightOf.delete(exec);
  }

  /** Closed runs past their namespace's retention are forgotten (and deleted from the store). */
  async enforceRetention(): Promise<void> {
    const now = this.timers.now();
    for (const exec of [...this.closedOrder]) {
      const ns = this.namespaces.has(exec.s.namespace) ? this.namespaces.get(exec.s.namespace) : undefined;
      if (ns && (exec.s.closeTime ?? now) + ns.retentionMs <= now) this.forget(exec);
    }
    if (this.store) {
      for (const ns of this.namespaces.list()) await this.store.deleteClosedBefore(ns.name, now - ns.retentionMs);
    }
  }

  /** Loads every open run from the store and resumes it (durable mode start-up). */
  async resumeFromStore(): Promise<number> {
    if (!this.store) return 0;
    const open = await this.store.loadOpenExecutions();
    // Skipped time is not stored; a skipping clock restarts at the latest time the runs have seen.
    let latest = 0;
    for (const { history } of open) {
      const last = history.length ? tsToMs(decodeEvent(history[history.length - 1]).eventTime) : undefined;
      if (last && last > latest) latest = last;
    }
    this.timers.advanceTo(latest);
    await this.run((tx) => {
      for (const { record, history } of open) {
        const exec = new Execution(record, history, this.timers, this);
        this.executions.set(exec.key, exec);
        this.current.set(this.workflowKey(record.namespace, record.workflowId), record.runId);
        exec.resumeAfterLoad();
        tx.touch(exec);
      }
    });
    return open.length;
  }

  stop(): void {
    this.stopped = true;
    this.matching.stop();
    for (const exec of this.executions.values()) this.timers.cancel(exec);
  }
}
