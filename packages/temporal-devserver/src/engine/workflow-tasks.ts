/**
 * Workflow tasks and queries: dispatching tasks to pollers (to the sticky queue of the worker that
 * has the run cached, with only the new events, else to the normal queue with the full history),
 * completing and failing them, and answering queries either inside the next workflow task or as a
 * legacy query task.
 */
import crypto from 'node:crypto';
import { status as grpcStatus } from '@grpc/grpc-js';
import { durToMs, encodeWithHistory, enums, type IPayloads, msToTs, temporal } from '../proto';
import { invalidArgument, notFound, queryFailed, RpcError } from '../rpc/errors';
import { type CallContext, longPollWindow } from '../rpc/grpc-server';
import { pollerOf } from './matching';
import type { ActivityTasks } from './activity-tasks';
import { WorkflowTaskCompletion } from './commands';
import type { Engine, Tx } from './engine';
import type { Execution } from './execution';
import { encodePageToken, HISTORY_PAGE_SIZE } from './history-pages';
import { decodeToken, encodeToken } from './task-token';
import { updateMessages } from './updates';

const ws = temporal.api.workflowservice.v1;
type IWorkflowQuery = temporal.api.query.v1.IWorkflowQuery;

const POLL_WINDOW_MS = 60_000;
const QUERY_TIMEOUT_MS = 60_000;
/** How long a task waits for the sticky worker before going to the normal queue (SDK default). */
const STICKY_TIMEOUT_MS = 10_000;
const NORMAL_QUEUE = enums.TaskQueueKind.TASK_QUEUE_KIND_NORMAL;
const Status = enums.WorkflowExecutionStatus;
/** Completions refused because something arrived while the task ran: the retry will see it. */
const RACES = new Set<number>([
  enums.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
  enums.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE,
]);

interface PendingQuery {
  id: string;
  exec: Execution;
  query: IWorkflowQuery;
  /** buffered: waits for the next workflow task; sent: inside a running task; legacy: its own query task. */
  state: 'buffered' | 'sent' | 'legacy';
  sentSeq?: number;
  done: boolean;
  finish(result: { answer?: IPayloads | null } | { error: RpcError }): void;
}

export class WorkflowTasks {
  private readonly queries = new Map<string, PendingQuery>();
  private readonly queriesByRun = new Map<string, Set<PendingQuery>>();

  constructor(
    private readonly engine: Engine,
    private readonly activities: ActivityTasks,
  ) {
    engine.onPublish.push((tx) => this.afterPublish(tx));
  }

  /**
   * Offers the scheduled workflow task `seq` of `exec` to pollers: of the sticky queue of the
   * worker that has the run cached (with only the new events), else of its task queue.
   */
  enqueue(exec: Execution, seq: number): void {
    const { namespace, runId } = exec.s;
    const sticky = exec.sticky;
    this.engine.matching.add(namespace, 'workflow', sticky?.queue ?? exec.s.wft?.taskQueue ?? exec.s.taskQueue, {
      take: (identity) => this.dispatch(namespace, runId, seq, identity, !!sticky),
    });
  }

  /** A worker is shutting down: its sticky runs go back to the normal queue with full histories. */
  releaseSticky(namespace: string, stickyQueue: string): void {
    for (const exec of this.engine.executions.values()) {
      if (exec.s.namespace !== namespace || exec.sticky?.queue !== stickyQueue) continue;
      exec.sticky = undefined;
      const wft = exec.s.wft;
      if (exec.running && wft && !wft.started) this.enqueue(exec, wft.seq);
      this.engine.timers.set(exec, exec.nextDeadline());
    }
    this.engine.matching.drop(namespace, 'workflow', stickyQueue);
  }

  private dispatch(namespace: string, runId: string, seq: number, identity: string, sticky: boolean): Buffer | undefined {
    const exec = this.engine.execution(namespace, runId);
    if (!exec) return undefined;
    const started = exec.startWorkflowTask(seq, identity);
    if (!started) return undefined;
    this.engine.timers.set(exec, exec.nextDeadline());
    const s = exec.s;
    const queries: Record<string, IWorkflowQuery> = {};
    for (const q of this.queriesByRun.get(exec.key) ?? []) {
      if (q.state === 'buffered' && !q.done) {
        q.state = 'sent';
        q.sentSeq = seq;
        queries[q.id] = q.query;
      }
    }
    // A sticky worker has the run cached up to its last completed task: only newer events go out.
    const from = sticky ? s.lastCompletedWftStartedId : 0;
    const fits = exec.history.length - from + started.events.length <= HISTORY_PAGE_SIZE;
    const page = fits ? [...exec.history.slice(from), ...started.events] : exec.history.slice(from, from + HISTORY_PAGE_SIZE);
    return encodeWithHistory(
      ws.PollWorkflowTaskQueueResponse,
      {
        taskToken: encodeToken({ k: 'w', ns: s.namespace, wid: s.workflowId, rid: s.runId, seq, att: started.wft.attempt, req: started.requestId }),
        workflowExecution: { workflowId: s.workflowId, runId: s.runId },
        workflowType: { name: s.workflowType },
        previousStartedEventId: s.lastCompletedWftStartedId,
        startedEventId: started.startedEventId,
        attempt: started.wft.attempt,
        backlogCountHint: this.engine.matching.backlog(s.namespace, 'workflow', started.wft.taskQueue),
        nextPageToken: fits ? undefined : encodePageToken({ rid: s.runId, next: from + HISTORY_PAGE_SIZE + 1 }),
        workflowExecutionTaskQueue: { name: started.wft.taskQueue, kind: NORMAL_QUEUE },
        scheduledTime: msToTs(started.wft.scheduledTime),
        startedTime: msToTs(started.wft.started!.time),
        queries,
        messages: updateMessages(exec, seq, sticky, started.startedEventId),
      },
      8,
      page,
    );
  }

  async poll(req: temporal.api.workflowservice.v1.IPollWorkflowTaskQueueRequest, ctx: CallContext): Promise<object | Buffer> {
    const ns = this.engine.namespaces.get(req.namespace);
    const queue = req.taskQueue?.name;
    if (!queue) throw invalidArgument('TaskQueue is not set on request.');
    const window = longPollWindow(ctx, POLL_WINDOW_MS);
    return (await this.engine.matching.poll(ns.name, 'workflow', queue, pollerOf(req), ctx, window)) ?? {};
  }

  /** The run and task a workflow-task token refers to, if that exact dispatch is still running. */
  private runningTask(token: Uint8Array | null | undefined): Execution {
    const t = decodeToken(token);
    if (t.k !== 'w') throw notFound('Workflow task not found.');
    const exec = this.engine.execution(t.ns, t.rid);
    const wft = exec?.s.wft;
    if (!exec?.running || !wft?.started || wft.seq !== t.seq || wft.attempt !== t.att || wft.started.requestId !== t.req) {
      this.engine.log.debug(
        { workflowId: t.wid, runId: t.rid, running: exec?.running, task: t.seq, current: wft?.seq, started: !!wft?.started },
        'answer for a workflow task that is no longer running',
      );
      throw notFound('Workflow task not found.');
    }
    return exec;
  }

  async complete(req: temporal.api.workflowservice.v1.IRespondWorkflowTaskCompletedRequest): Promise<object> {
    let exec = this.runningTask(req.taskToken);
    const completion = new WorkflowTaskCompletion(this.engine, exec, req);
    for (const child of completion.childWorkflowIds()) await this.engine.prefetchCurrent(child.namespace, child.workflowId);
    const outcome = await this.engine.run((tx) => {
      exec = this.runningTask(req.taskToken);
      const bad = completion.validate();
      if (bad) {
        // A retry that keeps failing is dropped and left to time out, as Temporal does.
        if (exec.s.wft!.attempt > 1 && !RACES.has(bad.cause)) {
          return bad;
        }
        tx.touch(exec);
        exec.failWorkflowTask({
          timedOut: false,
          cause: bad.cause,
          failure: { message: bad.message, serverFailureInfo: { nonRetryable: false } },
          identity: req.identity ?? '',
        });
        return bad;
      }
      tx.touch(exec);
      const stickyQueue = req.stickyAttributes?.workerTaskQueue?.name;
      exec.sticky = stickyQueue ? { queue: stickyQueue, timeoutMs: durToMs(req.stickyAttributes!.scheduleToStartTimeout) || STICKY_TIMEOUT_MS } : undefined;
      completion.apply(tx);
      this.resolveQueryResults(exec, req.queryResults);
      // Eagerly requested activities start now, for this worker; their queued tasks go stale.
      const eager = exec.running ? completion.eagerActivities.filter((rec) => exec.activityByScheduledId(rec.scheduledEventId) === rec) : [];
      return { activityTasks: eager.map((rec) => this.activities.claim(exec, rec, req.identity ?? '')) };
    });
    if ('cause' in outcome) throw invalidArgument(outcome.message);
    return outcome;
  }

  async fail(req: temporal.api.workflowservice.v1.IRespondWorkflowTaskFailedRequest): Promise<object> {
    await this.engine.run((tx) => {
      const exec = tx.touch(this.runningTask(req.taskToken));
      exec.failWorkflowTask({ timedOut: false, cause: req.cause ?? 0, failure: req.failure, identity: req.identity ?? '' });
    });
    return {};
  }

  // ------------------------------------------------------------------ queries

  async query(req: temporal.api.workflowservice.v1.IQueryWorkflowRequest, ctx: CallContext): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    const execution = req.execution;
    if (!execution?.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    if (!req.query?.queryType) throw invalidArgument('QueryType is not set on request.');
    const exec = await this.engine.readRun(ns.name, execution.workflowId, execution.runId);
    const s = exec.s;
    const RC = enums.QueryRejectCondition;
    if (
      (req.queryRejectCondition === RC.QUERY_REJECT_CONDITION_NOT_OPEN && !exec.running) ||
      (req.queryRejectCondition === RC.QUERY_REJECT_CONDITION_NOT_COMPLETED_CLEANLY && !exec.running && s.status !== Status.WORKFLOW_EXECUTION_STATUS_COMPLETED)
    ) {
      return { queryRejected: { status: s.status } };
    }
    const answer = await new Promise<IPayloads | null | undefined>((resolve, reject) => {
      const q: PendingQuery = {
        id: crypto.randomUUID(),
        exec,
        query: req.query!,
        state: 'buffered',
        done: false,
        finish: (result) => {
          if (q.done) return;
          q.done = true;
          clearTimeout(timer);
          this.queries.delete(q.id);
          const set = this.queriesByRun.get(exec.key);
          set?.delete(q);
          if (set && !set.size) this.queriesByRun.delete(exec.key);
          if ('error' in result) reject(result.error);
          else resolve(result.answer);
        },
      };
      const timer = setTimeout(
        () => q.finish({ error: new RpcError(grpcStatus.DEADLINE_EXCEEDED, 'query timed out: no worker answered') }),
        Math.max(1, Math.min(QUERY_TIMEOUT_MS, ctx.msUntilDeadline())),
      );
      ctx.onCancel(() => q.finish({ error: new RpcError(grpcStatus.CANCELLED, 'query cancelled') }));
      this.queries.set(q.id, q);
      let set = this.queriesByRun.get(exec.key);
      if (!set) {
        set = new Set();
        this.queriesByRun.set(exec.key, set);
      }
      set.add(q);
      this.placeQuery(q);
    });
    return { queryResult: answer ?? undefined };
  }

  /** A query rides with the run's next workflow task if one is coming, else gets its own task. */
  private placeQuery(q: PendingQuery): void {
    const exec = q.exec;
    if (q.state === 'sent') {
      const wft = exec.s.wft;
      if (wft?.started && wft.seq === q.sentSeq && exec.running) return;
      q.state = 'buffered';
    }
    if (q.state !== 'buffered') return;
    if (exec.running && exec.s.wft) {
      // Not yet dispatched: it will be attached when it is.
      return;
    }
    q.state = 'legacy';
    const { namespace, taskQueue } = exec.s;
    this.engine.matching.add(namespace, 'workflow', taskQueue, { take: () => this.dispatchLegacyQuery(q) });
  }

  private dispatchLegacyQuery(q: PendingQuery): Buffer | undefined {
    if (q.done) return undefined;
    const exec = q.exec;
    const s = exec.s;
    const now = this.engine.timers.now();
    const page = exec.history.slice(0, HISTORY_PAGE_SIZE);
    return encodeWithHistory(
      ws.PollWorkflowTaskQueueResponse,
      {
        taskToken: encodeToken({ k: 'q', ns: s.namespace, id: q.id }),
        workflowExecution: { workflowId: s.workflowId, runId: s.runId },
        workflowType: { name: s.workflowType },
        previousStartedEventId: s.lastCompletedWftStartedId,
        startedEventId: 0,
        attempt: 1,
        nextPageToken: exec.history.length > HISTORY_PAGE_SIZE ? encodePageToken({ rid: s.runId, next: HISTORY_PAGE_SIZE + 1 }) : undefined,
        query: q.query,
        workflowExecutionTaskQueue: { name: s.taskQueue, kind: NORMAL_QUEUE },
        scheduledTime: msToTs(now),
        startedTime: msToTs(now),
      },
      8,
      page,
    );
  }

  respondQueryTask(req: temporal.api.workflowservice.v1.IRespondQueryTaskCompletedRequest): object {
    const t = decodeToken(req.taskToken);
    if (t.k !== 'q') throw notFound('query task not found');
    const q = this.queries.get(t.id);
    if (!q) throw notFound('query task not found');
    if (req.completedType === enums.QueryResultType.QUERY_RESULT_TYPE_ANSWERED) q.finish({ answer: req.queryResult });
    else q.finish({ error: queryFailed(req.errorMessage || req.failure?.message || 'query failed', req.failure) });
    return {};
  }

  private resolveQueryResults(exec: Execution, results: Record<string, temporal.api.query.v1.IWorkflowQueryResult> | null | undefined): void {
    for (const [id, result] of Object.entries(results ?? {})) {
      const q = this.queries.get(id);
      if (!q || q.exec !== exec) continue;
      if (result.resultType === enums.QueryResultType.QUERY_RESULT_TYPE_ANSWERED) q.finish({ answer: result.answer });
      else q.finish({ error: queryFailed(result.errorMessage || result.failure?.message || 'query failed', result.failure) });
    }
  }

  /** After every operation: queries whose task went away are re-placed. */
  private afterPublish(tx: Tx): void {
    for (const exec of tx.touched) {
      const set = this.queriesByRun.get(exec.key);
      if (!set) continue;
      for (const q of [...set]) this.placeQuery(q);
    }
  }
}
