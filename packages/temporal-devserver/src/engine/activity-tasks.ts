/**
 * Activity tasks: dispatch to pollers, heartbeats (which carry cancellation back to the worker),
 * and the completed / failed / canceled answers, by task token or by activity id.
 */
import { decodeB64, decodeEvent, enums, type Loose, msToDurAlways, msToTs, Payloads, temporal, type IFailure, type IPayloads } from '../proto';
import { invalidArgument, notFound } from '../rpc/errors';
import { type CallContext, longPollWindow } from '../rpc/grpc-server';
import { pollerOf } from './matching';
import type { Engine } from './engine';
import type { Execution } from './execution';
import { retryPolicyProto } from './retry-policy';
import type { ActivityRecord } from './state';
import { decodeToken, encodeToken } from './task-token';

const POLL_WINDOW_MS = 60_000;

type ActivityRef = { exec: Execution; rec: ActivityRecord };

export class ActivityTasks {
  constructor(private readonly engine: Engine) {}

  enqueue(exec: Execution, rec: ActivityRecord, attempt: number): void {
    const { namespace, runId } = exec.s;
    const scheduledEventId = rec.scheduledEventId;
    this.engine.matching.add(namespace, 'activity', rec.taskQueue, {
      take: (identity) => this.dispatch(namespace, runId, scheduledEventId, attempt, identity),
    });
  }

  private dispatch(namespace: string, runId: string, scheduledEventId: number, attempt: number, identity: string): object | undefined {
    const exec = this.engine.execution(namespace, runId);
    const rec = exec?.running ? exec.activityByScheduledId(scheduledEventId) : undefined;
    if (!exec || !rec || rec.phase !== 'scheduled' || rec.attempt !== attempt) return undefined;
    const task = this.claim(exec, rec, identity);
    this.engine.timers.set(exec, exec.nextDeadline());
    return task;
  }

  /** Starts the attempt for `identity` and builds its PollActivityTaskQueueResponse. */
  claim(exec: Execution, rec: ActivityRecord, identity: string): object {
    exec.startActivity(rec, identity);
    const s = exec.s;
    const scheduled = decodeEvent(exec.history[rec.scheduledEventId - 1]).activityTaskScheduledEventAttributes!;
    return {
      taskToken: encodeToken({ k: 'a', ns: s.namespace, wid: s.workflowId, rid: s.runId, sched: rec.scheduledEventId, att: rec.attempt }),
      workflowNamespace: s.namespace,
      workflowType: { name: s.workflowType },
      workflowExecution: { workflowId: s.workflowId, runId: s.runId },
      activityType: scheduled.activityType,
      activityId: rec.activityId,
      header: scheduled.header,
      input: scheduled.input,
      heartbeatDetails: decodeB64(Payloads, rec.heartbeatDetails),
      scheduledTime: msToTs(rec.firstScheduledTime),
      currentAttemptScheduledTime: msToTs(rec.attemptScheduledTime),
      startedTime: msToTs(rec.started!.time),
      attempt: rec.attempt,
      scheduleToCloseTimeout: msToDurAlways(rec.scheduleToCloseMs),
      startToCloseTimeout: msToDurAlways(rec.startToCloseMs),
      heartbeatTimeout: msToDurAlways(rec.heartbeatMs),
      retryPolicy: retryPolicyProto(rec.retry),
      priority: scheduled.priority,
    };
  }

  async poll(req: temporal.api.workflowservice.v1.IPollActivityTaskQueueRequest, ctx: CallContext): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    const queue = req.taskQueue?.name;
    if (!queue) throw invalidArgument('TaskQueue is not set on request.');
    const res = await this.engine.matching.poll(ns.name, 'activity', queue, pollerOf(req), ctx, longPollWindow(ctx, POLL_WINDOW_MS));
    return res ?? {};
  }

  /** The activity a token names; its attempt must still be the current one. */
  private byToken(token: Uint8Array | null | undefined): ActivityRef {
    const t = decodeToken(token);
    if (t.k !== 'a') throw notFound('activity task not found');
    const exec = this.engine.execution(t.ns, t.rid);
    const rec = exec?.running ? exec.activityByScheduledId(t.sched) : undefined;
    if (!exec || !rec || rec.attempt !== t.att || rec.phase === 'backoff') throw notFound('activity task not found');
    return { exec, rec };
  }

  private byId(req: { namespace?: string | null; workflowId?: string | null; runId?: string | null; activityId?: string | null }): ActivityRef {
    const ns = this.engine.namespaces.get(req.namespace);
    if (!req.workflowId || !req.activityId) throw invalidArgument('WorkflowId and ActivityId are required.');
    const exec = this.engine.requireRunning(ns.name, req.workflowId, req.runId);
    const rec = exec.activityById(req.activityId);
    if (!rec || rec.phase === 'backoff') throw notFound('activity not found');
    return { exec, rec };
  }

  private async heartbeat(find: () => ActivityRef, details: IPayloads | null | undefined, identity: string): Promise<object> {
    return this.engine.run((tx) => {
      const { exec, rec } = find();
      tx.touch(exec);
      // A worker heartbeating an attempt we think is unclaimed (e.g. after a restart) has claimed it.
      if (rec.phase === 'scheduled') exec.startActivity(rec, identity);
      exec.recordHeartbeat(rec, details);
      return { cancelRequested: !!rec.cancelRequested };
    });
  }

  recordHeartbeat(req: temporal.api.workflowservice.v1.IRecordActivityTaskHeartbeatRequest): Promise<object> {
    return this.heartbeat(() => this.byToken(req.taskToken), req.details, req.identity ?? '');
  }

  recordHeartbeatById(req: temporal.api.workflowservice.v1.IRecordActivityTaskHeartbeatByIdRequest): Promise<object> {
    return this.heartbeat(() => this.byId(req), req.details, req.identity ?? '');
  }

  private async respond(find: () => ActivityRef, apply: (ref: ActivityRef) => void): Promise<object> {
    await this.engine.run((tx) => {
      const ref = find();
      tx.touch(ref.exec);
      apply(ref);
    });
    return {};
  }

  completed(req: { taskToken?: Uint8Array | null; result?: IPayloads | null; identity?: string | null }): Promise<object> {
    return this.respond(
      () => this.byToken(req.taskToken),
      ({ exec, rec }) => exec.completeActivity(rec, req.result, req.identity ?? ''),
    );
  }

  completedById(req: temporal.api.workflowservice.v1.IRespondActivityTaskCompletedByIdRequest): Promise<object> {
    return this.respond(
      () => this.byId(req),
      ({ exec, rec }) => exec.completeActivity(rec, req.result, req.identity ?? ''),
    );
  }

  private failWith(ref: ActivityRef, failure: IFailure | null | undefined, lastHeartbeat: IPayloads | null | undefined, identity: string): void {
    if (lastHeartbeat) ref.exec.recordHeartbeat(ref.rec, lastHeartbeat);
    ref.exec.failActivityAttempt(ref.rec, failure, identity);
  }

  failed(req: temporal.api.workflowservice.v1.IRespondActivityTaskFailedRequest): Promise<object> {
    return this.respond(
      () => this.byToken(req.taskToken),
      (ref) => this.failWith(ref, req.failure, req.lastHeartbeatDetails, req.identity ?? ''),
    );
  }

  failedById(req: temporal.api.workflowservice.v1.IRespondActivityTaskFailedByIdRequest): Promise<object> {
    return this.respond(
      () => this.byId(req),
      (ref) => this.failWith(ref, req.failure, req.lastHeartbeatDetails, req.identity ?? ''),
    );
  }

  canceled(req: temporal.api.workflowservice.v1.IRespondActivityTaskCanceledRequest): Promise<object> {
    return this.respond(
      () => this.byToken(req.taskToken),
      ({ exec, rec }) => exec.cancelActivityByWorker(rec, req.details, req.identity ?? ''),
    );
  }

  canceledById(req: temporal.api.workflowservice.v1.IRespondActivityTaskCanceledByIdRequest): Promise<object> {
    return this.respond(
      () => this.byId(req),
      ({ exec, rec }) => exec.cancelActivityByWorker(rec, req.details, req.identity ?? ''),
    );
  }

  /** PendingActivityInfo for DescribeWorkflowExecution. */
  static pendingInfo(rec: ActivityRecord): Loose<temporal.api.workflow.v1.IPendingActivityInfo> {
    const S = enums.PendingActivityState;
    const state = rec.cancelRequested
      ? S.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
      : rec.phase === 'started'
        ? S.PENDING_ACTIVITY_STATE_STARTED
        : S.PENDING_ACTIVITY_STATE_SCHEDULED;
    return {
      activityId: rec.activityId,
      activityType: { name: rec.activityType },
      state,
      heartbeatDetails: decodeB64(Payloads, rec.heartbeatDetails),
      lastHeartbeatTime: rec.lastHeartbeatTime ? msToTs(rec.lastHeartbeatTime) : undefined,
      lastStartedTime: rec.lastStartedTime ? msToTs(rec.lastStartedTime) : undefined,
      attempt: rec.attempt,
      maximumAttempts: rec.retry.maxAttempts,
      scheduledTime: msToTs(rec.attemptScheduledTime),
      expirationTime: rec.scheduleToCloseMs ? msToTs(rec.firstScheduledTime + rec.scheduleToCloseMs) : undefined,
      lastFailure: decodeB64(temporal.api.failure.v1.Failure, rec.lastFailure),
      lastWorkerIdentity: rec.lastWorkerIdentity ?? '',
      lastAttemptCompleteTime: rec.lastAttemptCompleteTime ? msToTs(rec.lastAttemptCompleteTime) : undefined,
      nextAttemptScheduleTime: rec.nextAttemptAt ? msToTs(rec.nextAttemptAt) : undefined,
    };
  }
}
