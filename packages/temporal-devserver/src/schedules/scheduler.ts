/**
 * Temporal Schedules: create, describe, update, patch (trigger, backfill, pause, unpause), delete,
 * list, matching times; and the clock that takes their actions. A schedule's state is written in
 * the same operation as the workflow starts it causes, so a restart neither loses nor repeats an
 * action. Temporal runs each schedule as a system workflow; here the server keeps the same state
 * itself and answers the same describe and list responses.
 */
import crypto from 'node:crypto';
import { status as grpcStatus } from '@grpc/grpc-js';
import { decodeB64, durToMs, encodeB64, enums, Long, Memo, msToTs, root, SearchAttributes, type IPayload, type Loose, type temporal, tsToMs } from '../proto';
import { invalidArgument, notFound, RpcError } from '../rpc/errors';
import type { Engine, Tx } from '../engine/engine';
import type { Execution } from '../engine/execution';
import type { NamespaceRecord } from '../engine/namespaces';
import type { TimerOwner } from '../engine/timer-queue';
import type { WorkflowOperations } from '../engine/workflow-operations';
import { decodeSearchAttributeValues } from '../engine/describe';
import { attributeResolver } from '../engine/visibility-service';
import { parseVisibilityQuery } from '../visibility/query';
import { evaluate, type VisibilityRow } from '../visibility/row';
import { compileSpec, jitterOf, nextTime, SpecError, timesBetween } from './spec';

type ISchedule = temporal.api.schedule.v1.ISchedule;
type IStartRequest = temporal.api.workflowservice.v1.IStartWorkflowExecutionRequest;

const ScheduleType = root.lookupType('temporal.api.schedule.v1.Schedule');
const Overlap = enums.ScheduleOverlapPolicy;
const Status = enums.WorkflowExecutionStatus;

/** Temporal's defaults: catch up on times missed within a year, remember 10 recent actions, show 10 future ones. */
const DEFAULT_CATCHUP_MS = 365 * 86_400_000;
const MIN_CATCHUP_MS = 10_000;
const RECENT_KEPT = 10;
const FUTURE_SHOWN = 10;
/** Missed times counted one by one after a long outage; beyond that the schedule jumps ahead. */
const MAX_MISSED_COUNTED = 1000;
const LIST_PAGE = 1000;

interface PendingAction {
  nominal: number;
  actual: number;
  overlap: number;
  /** Triggered or backfilled (not counted against remaining actions). */
  manual: boolean;
}

interface RecentAction {
  nominal: number;
  actual: number;
  workflowId: string;
  runId: string;
  status: number;
}

/** A schedule's persisted state (JSON). */
export interface ScheduleRecord {
  namespace: string;
  scheduleId: string;
  /** Encoded temporal.api.schedule.v1.Schedule, its spec compiled (base64). */
  schedule: string;
  memo?: string;
  searchAttributes?: string;
  conflictToken: number;
  createRequestId: string;
  createTime: number;
  updateTime?: number;
  /** Scheduled times up to here have been handled: taken, skipped, buffered or missed. */
  processedUpTo: number;
  actionCount: number;
  missedCatchupWindow: number;
  overlapSkipped: number;
  bufferDropped: number;
  buffered: PendingAction[];
  running: { workflowId: string; runId: string }[];
  recent: RecentAction[];
}

class Schedule implements TimerOwner {
  timerIndex = -1;
  timerAt = 0;
  spec!: temporal.api.schedule.v1.IScheduleSpec;
  proto!: ISchedule;

  constructor(
    public rec: ScheduleRecord,
    private readonly onDue: (s: Schedule) => void,
  ) {
    this.decode();
  }

  decode(): void {
    this.proto = ScheduleType.decode(Buffer.from(this.rec.schedule, 'base64')) as ISchedule;
    this.spec = this.proto.spec ?? {};
  }

  set(proto: ISchedule): void {
    this.rec.schedule = Buffer.from(ScheduleType.encode(proto).finish()).toString('base64');
    this.decode();
  }

  get key(): string {
    return `${this.rec.namespace}/${this.rec.scheduleId}`;
  }

  get paused(): boolean {
    return !!this.proto.state?.paused;
  }

  get overlap(): number {
    return this.proto.policies?.overlapPolicy || Overlap.SCHEDULE_OVERLAP_POLICY_SKIP;
  }

  get catchupMs(): number {
    return Math.max(MIN_CATCHUP_MS, durToMs(this.proto.policies?.catchupWindow) || DEFAULT_CATCHUP_MS);
  }

  /** Scheduled actions left (Infinity unless the schedule limits them). */
  get remaining(): number {
    const st = this.proto.state;
    return st?.limitedActions ? Number(st.remainingActions ?? 0) : Infinity;
  }

  actualTime(nominal: number): number {
    return nominal + jitterOf(this.spec, this.key, nominal);
  }

  onTimer(): void {
    this.onDue(this);
  }
}

function badSpec(err: unknown): never {
  if (err instanceof SpecError) throw invalidArgument(`Invalid schedule spec: ${err.message}`);
  throw err;
}

/** RFC 3339 in UTC without fractions, as Temporal suffixes scheduled workflow ids. */
function idTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

function jsonPayload(value: unknown, type: string): IPayload {
  return { metadata: { encoding: Buffer.from('json/plain'), type: Buffer.from(type) }, data: Buffer.from(JSON.stringify(value)) };
}

export class Scheduler {
  private readonly schedules = new Map<string, Schedule>();
  /** All schedule work runs one piece at a time: decisions read the state the previous one left. */
  private queue: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly engine: Engine,
    private readonly ops: WorkflowOperations,
  ) {
    engine.onRunClosed.push((exec, tx) => this.onRunClosed(exec, tx));
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private get now(): number {
    return this.engine.timers.now();
  }

  /** Durable mode start-up: schedules come back with their timers; runs that closed meanwhile leave `running`. */
  async load(): Promise<number> {
    const states = (await this.engine.store?.loadSchedules()) ?? [];
    for (const state of states) {
      const sched = new Schedule(JSON.parse(state) as ScheduleRecord, (s) => this.due(s));
      if (!this.engine.namespaces.has(sched.rec.namespace)) continue;
      this.schedules.set(sched.key, sched);
    }
    for (const sched of this.schedules.values()) {
      for (const r of [...sched.rec.running]) {
        const exec = await this.engine.readRun(sched.rec.namespace, r.workflowId).catch(() => undefined);
        if (!exec?.running) sched.rec.running.splice(sched.rec.running.indexOf(r), 1);
      }
      this.arm(sched);
      if (sched.rec.buffered.length) this.due(sched);
    }
    return this.schedules.size;
  }

  stop(): void {
    this.stopped = true;
    for (const s of this.schedules.values()) this.engine.timers.cancel(s);
  }

  private find(ns: NamespaceRecord, scheduleId: string | null | undefined): Schedule {
    if (!scheduleId) throw invalidArgument('ScheduleId is not set on request.');
    const sched = this.schedules.get(`${ns.name}/${scheduleId}`);
    if (!sched) throw notFound(`schedule "${scheduleId}" not found`);
    return sched;
  }

  /** The timer of a schedule: its next scheduled action (none while paused or out of actions). */
  private arm(sched: Schedule): void {
    if (this.stopped) return;
    const next = sched.paused || sched.remaining <= 0 ? undefined : nextTime(sched.spec, sched.rec.processedUpTo);
    this.engine.timers.set(sched, next === undefined ? undefined : sched.actualTime(next));
  }

  private due(sched: Schedule): void {
    // A skipping clock holds still until the schedule's starts exist (they wait on the store first).
    this.engine.timers.lock();
    this.serial(() => this.process(sched, []))
      .catch((err) => this.engine.log.error({ err, scheduleId: sched.rec.scheduleId }, 'schedule action failed'))
      .finally(() => this.engine.timers.unlock());
  }

  private validated(ns: NamespaceRecord, schedule: ISchedule | null | undefined): ISchedule {
    const s = schedule ?? {};
    const start = s.action?.startWorkflow;
    if (!start) throw invalidArgument('Schedule action is not set: only startWorkflow actions exist.');
    if (!start.workflowId) throw invalidArgument('WorkflowId is not set on the schedule action.');
    if (!start.workflowType?.name) throw invalidArgument('WorkflowType is not set on the schedule action.');
    if (!start.taskQueue?.name) throw invalidArgument('TaskQueue is not set on the schedule action.');
    if (start.cronSchedule) throw invalidArgument('A scheduled workflow cannot have a cron schedule.');
    this.engine.namespaces.validateSearchAttributes(ns, Object.keys(start.searchAttributes?.indexedFields ?? {}));
    let spec: temporal.api.schedule.v1.IScheduleSpec;
    try {
      spec = compileSpec(s.spec);
    } catch (err) {
      badSpec(err);
    }
    const overlapPolicy = s.policies?.overlapPolicy || Overlap.SCHEDULE_OVERLAP_POLICY_SKIP;
    return {
      ...s,
      spec,
      policies: { ...(s.policies ?? {}), overlapPolicy },
      state: {
        notes: s.state?.notes ?? '',
        paused: !!s.state?.paused,
        limitedActions: !!s.state?.limitedActions,
        remainingActions: Long.fromValue(s.state?.remainingActions ?? 0),
      },
    };
  }

  private write(tx: Tx, sched: Schedule, deleted = false): void {
    tx.schedules.push({ namespace: sched.rec.namespace, scheduleId: sched.rec.scheduleId, state: JSON.stringify(sched.rec), deleted });
  }

  // ------------------------------------------------------------------ RPCs

  create(req: temporal.api.workflowservice.v1.ICreateScheduleRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    if (!req.scheduleId) throw invalidArgument('ScheduleId is not set on request.');
    const schedule = this.validated(ns, req.schedule);
    this.engine.namespaces.validateSearchAttributes(ns, Object.keys(req.searchAttributes?.indexedFields ?? {}));
    return this.serial(async () => {
      const existing = this.schedules.get(`${ns.name}/${req.scheduleId}`);
      if (existing) {
        if (req.requestId && existing.rec.createRequestId === req.requestId) return { conflictToken: this.token(existing) };
        throw new RpcError(grpcStatus.ALREADY_EXISTS, `schedule "${req.scheduleId}" is already registered`);
      }
      const now = this.now;
      const rec: ScheduleRecord = {
        namespace: ns.name,
        scheduleId: req.scheduleId!,
        schedule: '',
        memo: encodeB64(Memo, req.memo?.fields && Object.keys(req.memo.fields).length ? req.memo : undefined),
        searchAttributes: encodeB64(
          SearchAttributes,
          req.searchAttributes?.indexedFields && Object.keys(req.searchAttributes.indexedFields).length
            ? { indexedFields: this.engine.namespaces.withTypes(ns, req.searchAttributes.indexedFields) }
            : undefined,
        ),
        conflictToken: 1,
        createRequestId: req.requestId || crypto.randomUUID(),
        createTime: now,
        processedUpTo: now,
        actionCount: 0,
        missedCatchupWindow: 0,
        overlapSkipped: 0,
        bufferDropped: 0,
        buffered: [],
        running: [],
        recent: [],
      };
      const sched = new Schedule(rec, (s) => this.due(s));
      sched.set(schedule);
      this.schedules.set(sched.key, sched);
      await this.process(sched, this.patchActions(sched, req.initialPatch), (s) => this.applyPauseNotes(s, req.initialPatch));
      return { conflictToken: this.token(sched) };
    });
  }

  describe(req: temporal.api.workflowservice.v1.IDescribeScheduleRequest): object {
    const sched = this.find(this.engine.namespaces.get(req.namespace), req.scheduleId);
    const r = sched.rec;
    return {
      schedule: { ...sched.proto, policies: { ...sched.proto.policies, catchupWindow: { seconds: sched.catchupMs / 1000 } } },
      info: {
        actionCount: r.actionCount,
        missedCatchupWindow: r.missedCatchupWindow,
        overlapSkipped: r.overlapSkipped,
        bufferDropped: r.bufferDropped,
        bufferSize: r.buffered.length,
        runningWorkflows: r.running.map((x) => ({ workflowId: x.workflowId, runId: x.runId })),
        recentActions: this.recentActions(sched),
        futureActionTimes: this.futureTimes(sched).map(msToTs),
        createTime: msToTs(r.createTime),
        updateTime: r.updateTime ? msToTs(r.updateTime) : undefined,
      },
      memo: decodeB64(Memo, r.memo),
      searchAttributes: decodeB64(SearchAttributes, r.searchAttributes),
      conflictToken: this.token(sched),
    };
  }

  update(req: temporal.api.workflowservice.v1.IUpdateScheduleRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    const schedule = this.validated(ns, req.schedule);
    return this.serial(async () => {
      const sched = this.find(ns, req.scheduleId);
      if (req.conflictToken?.length && Buffer.from(req.conflictToken).toString() !== String(sched.rec.conflictToken)) {
        throw new RpcError(grpcStatus.FAILED_PRECONDITION, 'mismatched conflict token: the schedule changed since it was read');
      }
      // A new spec applies from now on: times it would have matched before are not made up.
      sched.rec.processedUpTo = Math.max(sched.rec.processedUpTo, this.now);
      sched.set(schedule);
      if (req.searchAttributes) {
        sched.rec.searchAttributes = encodeB64(SearchAttributes, { indexedFields: this.engine.namespaces.withTypes(ns, req.searchAttributes.indexedFields) });
      }
      if (req.memo) sched.rec.memo = encodeB64(Memo, req.memo);
      await this.process(sched, []);
      return {};
    });
  }

  patch(req: temporal.api.workflowservice.v1.IPatchScheduleRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    return this.serial(async () => {
      const sched = this.find(ns, req.scheduleId);
      await this.process(sched, this.patchActions(sched, req.patch), (s) => this.applyPauseNotes(s, req.patch));
      return {};
    });
  }

  delete(req: temporal.api.workflowservice.v1.IDeleteScheduleRequest): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    return this.serial(async () => {
      const sched = this.find(ns, req.scheduleId);
      this.engine.timers.cancel(sched);
      this.schedules.delete(sched.key);
      // Workflows it started keep running, as in Temporal.
      await this.engine.run((tx) => this.write(tx, sched, true));
      return {};
    });
  }

  /**
   * Schedules of a namespace, by id; a query may name ScheduleId, TemporalSchedulePaused, WorkflowType
   * (of the action) and the schedule's own search attributes.
   */
  list(req: temporal.api.workflowservice.v1.IListSchedulesRequest): object {
    const ns = this.engine.namespaces.get(req.namespace);
    const query = parseVisibilityQuery(req.query, attributeResolver(ns, { ScheduleId: enums.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD }));
    if (query.groupBy || query.orderBy.length) throw invalidArgument(`invalid query "${req.query}": schedules are listed by id only`);
    const matches = (s: Schedule) => !query.where || evaluate(query.where, this.row(s));
    const all = [...this.schedules.values()]
      .filter((s) => s.rec.namespace === ns.name && matches(s))
      .sort((a, b) => a.rec.scheduleId.localeCompare(b.rec.scheduleId));
    const from = req.nextPageToken?.length ? Number(Buffer.from(req.nextPageToken).toString()) : 0;
    const size = req.maximumPageSize && req.maximumPageSize > 0 ? Math.min(req.maximumPageSize, LIST_PAGE) : LIST_PAGE;
    const page = all.slice(from, from + size);
    return {
      schedules: page.map((s) => ({
        scheduleId: s.rec.scheduleId,
        memo: decodeB64(Memo, s.rec.memo),
        searchAttributes: decodeB64(SearchAttributes, s.rec.searchAttributes),
        info: {
          spec: s.spec,
          workflowType: s.proto.action?.startWorkflow?.workflowType,
          notes: s.proto.state?.notes ?? '',
          paused: s.paused,
          recentActions: this.recentActions(s),
          futureActionTimes: this.futureTimes(s).map(msToTs),
        },
      })),
      nextPageToken: from + size < all.length ? Buffer.from(String(from + size)) : undefined,
    };
  }

  /** A schedule as visibility sees it: Temporal's scheduler workflow, running in the TemporalScheduler division. */
  private row(s: Schedule): VisibilityRow {
    return {
      namespace: s.rec.namespace,
      workflowId: s.rec.scheduleId,
      runId: '',
      workflowType: s.proto.action?.startWorkflow?.workflowType?.name ?? '',
      taskQueue: s.proto.action?.startWorkflow?.taskQueue?.name ?? '',
      status: Status.WORKFLOW_EXECUTION_STATUS_RUNNING,
      startTime: s.rec.createTime,
      executionTime: s.rec.createTime,
      historyLength: 0,
      historySizeBytes: 0,
      stateTransitions: s.rec.conflictToken,
      searchAttributes: {
        ...decodeSearchAttributeValues(s.rec.searchAttributes),
        ScheduleId: s.rec.scheduleId,
        TemporalSchedulePaused: s.paused,
        TemporalNamespaceDivision: 'TemporalScheduler',
      },
    };
  }

  /** Visibility rows of a namespace's schedules (what counts in the TemporalScheduler division see). */
  visibilityRows(namespace: string): VisibilityRow[] {
    return [...this.schedules.values()].filter((s) => s.rec.namespace === namespace).map((s) => this.row(s));
  }

  matchingTimes(req: temporal.api.workflowservice.v1.IListScheduleMatchingTimesRequest): object {
    const sched = this.find(this.engine.namespaces.get(req.namespace), req.scheduleId);
    const start = tsToMs(req.startTime);
    const end = tsToMs(req.endTime);
    if (start === undefined || end === undefined || end < start) throw invalidArgument('StartTime and EndTime must be set, EndTime not before StartTime.');
    // The times after the start, up to and including the end (as a backfill of that range takes them).
    return { startTime: timesBetween(sched.spec, start, end, 1000).map(msToTs) };
  }

  private token(sched: Schedule): Buffer {
    return Buffer.from(String(sched.rec.conflictToken));
  }

  private recentActions(sched: Schedule): Loose<temporal.api.schedule.v1.IScheduleActionResult>[] {
    return sched.rec.recent.map((a) => ({
      scheduleTime: msToTs(a.nominal),
      actualTime: msToTs(a.actual),
      startWorkflowResult: { workflowId: a.workflowId, runId: a.runId },
      startWorkflowStatus: a.status,
    }));
  }

  private futureTimes(sched: Schedule): number[] {
    const out: number[] = [];
    let t = Math.max(sched.rec.processedUpTo, sched.paused ? this.now : 0);
    const limit = Math.min(FUTURE_SHOWN, sched.remaining);
    while (out.length < limit) {
      const n = nextTime(sched.spec, t);
      if (n === undefined) break;
      out.push(sched.actualTime(n));
      t = n;
    }
    return out;
  }

  /** Triggers and backfills of a patch, as actions. */
  private patchActions(sched: Schedule, patch: temporal.api.schedule.v1.ISchedulePatch | null | undefined): PendingAction[] {
    const out: PendingAction[] = [];
    for (const b of patch?.backfillRequest ?? []) {
      const start = tsToMs(b.startTime);
      const end = tsToMs(b.endTime);
      if (start === undefined || end === undefined || end < start) throw invalidArgument('A backfill needs a start time and an end time not before it.');
      for (const nominal of timesBetween(sched.spec, start, end)) {
        out.push({ nominal, actual: nominal, overlap: b.overlapPolicy || sched.overlap, manual: true });
      }
    }
    if (patch?.triggerImmediately) {
      const now = this.now;
      const at = tsToMs(patch.triggerImmediately.scheduledTime) ?? now;
      out.push({ nominal: at, actual: now, overlap: patch.triggerImmediately.overlapPolicy || sched.overlap, manual: true });
    }
    return out;
  }

  private applyPauseNotes(sched: Schedule, patch: temporal.api.schedule.v1.ISchedulePatch | null | undefined): void {
    if (!patch?.pause && !patch?.unpause) return;
    const state = { ...(sched.proto.state ?? {}) };
    if (patch.pause) {
      state.paused = true;
      state.notes = patch.pause;
    } else if (patch.unpause) {
      state.paused = false;
      state.notes = patch.unpause;
    }
    sched.set({ ...sched.proto, state });
  }

  // ------------------------------------------------------------------ taking actions

  /**
   * One operation on a schedule: `change` (pause notes...), then the given manual actions, then every
   * scheduled time due by now, then whatever the buffer lets start; written with the workflow starts.
   */
  private async process(sched: Schedule, manual: PendingAction[], change?: (s: Schedule) => void): Promise<void> {
    if (!this.schedules.has(sched.key)) return;
    const now = this.now;
    const ns = this.engine.namespaces.get(sched.rec.namespace);
    change?.(sched);
    const { actions: due, upTo } = this.dueActions(sched, now);
    const candidates = [...sched.rec.buffered, ...manual, ...due];
    const starts = new Map<PendingAction, { startIn(tx: Tx): { runId?: string | null; started?: boolean | null } }>();
    for (const a of candidates) {
      try {
        starts.set(a, await this.ops.prepareStart(ns, this.startRequest(sched, a)));
      } catch (err) {
        this.engine.log.warn({ err, scheduleId: sched.rec.scheduleId }, 'scheduled workflow start refused');
      }
    }
    await this.engine.run((tx) => {
      const r = sched.rec;
      r.conflictToken++;
      r.updateTime = now;
      r.processedUpTo = Math.max(r.processedUpTo, upTo);
      const queue = [...manual, ...due];
      for (const a of queue) {
        if (!a.manual) this.spendAction(sched);
        this.decide(tx, sched, a, starts);
      }
      this.drainBuffer(tx, sched, starts);
      this.write(tx, sched);
    });
    this.arm(sched);
  }

  /**
   * Scheduled times due by `now`, and how far the schedule's clock may move: to `now`, or to just before
   * a time whose jittered moment has not come. While paused the clock moves on without acting; times
   * beyond the catch-up window are counted as missed, not taken (after a long outage only the first
   * MAX_MISSED_COUNTED are counted).
   */
  private dueActions(sched: Schedule, now: number): { actions: PendingAction[]; upTo: number } {
    if (sched.paused) return { actions: [], upTo: now };
    const actions: PendingAction[] = [];
    const cutoff = now - sched.catchupMs;
    let upTo = now;
    let left = sched.remaining;
    let missed = 0;
    for (const nominal of timesBetween(sched.spec, sched.rec.processedUpTo, now, MAX_MISSED_COUNTED + 1000)) {
      const actual = sched.actualTime(nominal);
      if (actual > now) {
        upTo = nominal - 1;
        break;
      }
      if (left-- <= 0) break;
      if (actual < cutoff) missed++;
      else actions.push({ nominal, actual, overlap: sched.overlap, manual: false });
    }
    sched.rec.missedCatchupWindow += missed;
    return { actions, upTo };
  }

  private spendAction(sched: Schedule): void {
    const st = sched.proto.state;
    if (!st?.limitedActions) return;
    sched.set({ ...sched.proto, state: { ...st, remainingActions: Long.fromNumber(Math.max(0, Number(st.remainingActions ?? 0) - 1)) } });
  }

  private runningExecs(sched: Schedule): Execution[] {
    const out: Execution[] = [];
    for (const r of [...sched.rec.running]) {
      const exec = this.engine.currentExecution(sched.rec.namespace, r.workflowId);
      if (exec?.running) out.push(exec);
      else sched.rec.running.splice(sched.rec.running.indexOf(r), 1);
    }
    return out;
  }

  private decide(tx: Tx, sched: Schedule, a: PendingAction, starts: Map<PendingAction, { startIn(tx: Tx): object }>): void {
    const running = this.runningExecs(sched);
    if (!running.length || a.overlap === Overlap.SCHEDULE_OVERLAP_POLICY_ALLOW_ALL) {
      this.start(tx, sched, a, starts);
      return;
    }
    const r = sched.rec;
    switch (a.overlap) {
      case Overlap.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE:
        if (r.buffered.length) r.bufferDropped++;
        else r.buffered.push(a);
        break;
      case Overlap.SCHEDULE_OVERLAP_POLICY_BUFFER_ALL:
        r.buffered.push(a);
        break;
      case Overlap.SCHEDULE_OVERLAP_POLICY_CANCEL_OTHER:
        for (const exec of running)
          tx.touch(exec).requestCancel({ cause: `cancelled by schedule ${r.scheduleId} (overlap policy CANCEL_OTHER)`, identity: 'temporal-scheduler' });
        r.buffered = [a];
        break;
      case Overlap.SCHEDULE_OVERLAP_POLICY_TERMINATE_OTHER:
        for (const exec of running)
          tx.touch(exec).terminate(`terminated by schedule ${r.scheduleId} (overlap policy TERMINATE_OTHER)`, undefined, 'temporal-scheduler');
        r.running = [];
        this.start(tx, sched, a, starts);
        break;
      default:
        r.overlapSkipped++;
    }
  }

  private drainBuffer(tx: Tx, sched: Schedule, starts: Map<PendingAction, { startIn(tx: Tx): object }>): void {
    const r = sched.rec;
    while (r.buffered.length && !this.runningExecs(sched).length) this.start(tx, sched, r.buffered.shift()!, starts);
  }

  private start(tx: Tx, sched: Schedule, a: PendingAction, starts: Map<PendingAction, { startIn(tx: Tx): object }>): void {
    const r = sched.rec;
    const prepared = starts.get(a);
    if (!prepared) return;
    const workflowId = this.startRequest(sched, a).workflowId!;
    let result: { runId?: string | null; started?: boolean | null };
    try {
      result = prepared.startIn(tx) as { runId?: string | null; started?: boolean | null };
    } catch (err) {
      // Already running under this id (a workflow id reuse policy said no): Temporal counts no action.
      this.engine.log.warn({ err, scheduleId: r.scheduleId, workflowId }, 'scheduled workflow start refused');
      return;
    }
    r.actionCount++;
    r.running.push({ workflowId, runId: result.runId ?? '' });
    r.recent.push({ nominal: a.nominal, actual: a.actual, workflowId, runId: result.runId ?? '', status: Status.WORKFLOW_EXECUTION_STATUS_RUNNING });
    if (r.recent.length > RECENT_KEPT) r.recent.splice(0, r.recent.length - RECENT_KEPT);
  }

  private startRequest(sched: Schedule, a: PendingAction): IStartRequest {
    const w = sched.proto.action!.startWorkflow!;
    const keep = sched.proto.policies?.keepOriginalWorkflowId;
    const indexedFields: Record<string, IPayload> = {
      ...(w.searchAttributes?.indexedFields ?? {}),
      TemporalScheduledById: jsonPayload(sched.rec.scheduleId, 'Keyword'),
      TemporalScheduledStartTime: jsonPayload(new Date(a.nominal).toISOString(), 'Datetime'),
    };
    return {
      namespace: sched.rec.namespace,
      workflowId: keep ? w.workflowId : `${w.workflowId}-${idTime(a.nominal)}`,
      workflowType: w.workflowType,
      taskQueue: w.taskQueue,
      input: w.input,
      workflowExecutionTimeout: w.workflowExecutionTimeout,
      workflowRunTimeout: w.workflowRunTimeout,
      workflowTaskTimeout: w.workflowTaskTimeout,
      identity: 'temporal-scheduler',
      // The same scheduled time never starts twice, even if an operation is retried.
      requestId: `${sched.rec.scheduleId}/${a.nominal}/${a.manual ? 'manual' : 'scheduled'}`,
      workflowIdReusePolicy: w.workflowIdReusePolicy || enums.WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
      retryPolicy: w.retryPolicy,
      memo: w.memo,
      searchAttributes: { indexedFields },
      header: w.header,
      userMetadata: w.userMetadata,
      priority: w.priority,
    };
  }

  /** A workflow a schedule started closed: it stops counting as running, and what waited in the buffer may start. */
  private onRunClosed(exec: Execution, tx: Tx): void {
    const scheduleId = exec.searchAttributeValues.TemporalScheduledById;
    if (typeof scheduleId !== 'string') return;
    const sched = this.schedules.get(`${exec.s.namespace}/${scheduleId}`);
    if (!sched) return;
    const r = sched.rec;
    const entry = r.running.find((x) => x.workflowId === exec.s.workflowId);
    if (!entry) return;
    if (exec.s.newRunId) {
      // Retried or continued as new: the workflow is still running, in its next run.
      entry.runId = exec.s.newRunId;
      this.write(tx, sched);
      return;
    }
    r.running.splice(r.running.indexOf(entry), 1);
    for (const a of r.recent) if (a.workflowId === exec.s.workflowId) a.status = exec.s.status;
    const failed = exec.s.status === Status.WORKFLOW_EXECUTION_STATUS_FAILED || exec.s.status === Status.WORKFLOW_EXECUTION_STATUS_TIMED_OUT;
    if (failed && sched.proto.policies?.pauseOnFailure) {
      sched.set({ ...sched.proto, state: { ...sched.proto.state, paused: true, notes: `paused after workflow ${exec.s.workflowId} failed` } });
    }
    this.write(tx, sched);
    if (r.buffered.length) setImmediate(() => this.due(sched));
  }
}
