/**
 * GetWorkflowExecutionHistory: paging, the close-event long poll the client uses to await a
 * result, following new events, and the in-flight workflow task events a worker needs when it
 * fetches the rest of a paged history.
 */
import { encodeWithHistory, enums, temporal } from '../proto';
import { invalidArgument } from '../rpc/errors';
import { type CallContext, longPollWindow } from '../rpc/grpc-server';
import type { Engine } from './engine';
import type { Execution } from './execution';
import { decodePageToken, encodePageToken, HISTORY_PAGE_SIZE } from './history-pages';

const ws = temporal.api.workflowservice.v1;
/** Temporal answers history long polls after 20 s; the client simply asks again. */
const LONG_POLL_MS = 20_000;

/** Resolves once `ready()` holds (checked whenever the run changes), the window passes or the call ends. */
function waitFor(exec: Execution, ready: () => boolean, ctx: CallContext, ms: number): Promise<void> {
  if (ready() || ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      exec.waiters.delete(check);
      resolve();
    };
    const check = () => {
      if (ready()) done();
    };
    const timer = setTimeout(done, ms);
    exec.waiters.add(check);
    ctx.onCancel(done);
  });
}

export class HistoryReader {
  constructor(private readonly engine: Engine) {}

  async get(req: temporal.api.workflowservice.v1.IGetWorkflowExecutionHistoryRequest, ctx: CallContext): Promise<Buffer> {
    const ns = this.engine.namespaces.get(req.namespace);
    const workflowId = req.execution?.workflowId;
    if (!workflowId) throw invalidArgument('WorkflowId is not set on request.');
    const token = decodePageToken(req.nextPageToken);
    const exec = await this.engine.readRun(ns.name, workflowId, token?.rid || req.execution?.runId);
    const respond = (events: Buffer[], next?: number) =>
      encodeWithHistory(
        ws.GetWorkflowExecutionHistoryResponse,
        { nextPageToken: next !== undefined ? encodePageToken({ rid: exec.s.runId, next }) : undefined, archived: false },
        1,
        events,
      );

    if (req.historyEventFilterType === enums.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT) {
      if (exec.running && req.waitNewEvent) {
        await waitFor(exec, () => !exec.running, ctx, longPollWindow(ctx, LONG_POLL_MS));
      }
      if (exec.running) return respond([], req.waitNewEvent ? 0 : undefined);
      return respond([exec.history[exec.history.length - 1]]);
    }

    const from = Math.max(1, token?.next ?? 1);
    if (req.waitNewEvent && exec.running && exec.history.length < from) {
      await waitFor(exec, () => !exec.running || exec.history.length >= from, ctx, longPollWindow(ctx, LONG_POLL_MS));
    }
    const pageSize = req.maximumPageSize && req.maximumPageSize > 0 ? req.maximumPageSize : HISTORY_PAGE_SIZE;
    const events = exec.history.slice(from - 1, from - 1 + pageSize);
    const next = from + events.length;
    if (next <= exec.history.length) return respond(events, next);
    if (req.waitNewEvent && exec.running) return respond(events, next);
    // A worker reading the rest of a task's history needs the task's own (not yet written) events.
    if (exec.wftStarted && !req.waitNewEvent) return respond([...events, ...exec.runningTaskEvents]);
    return respond(events);
  }

  /** Newest events first (the CLI reads a result this way); the token holds the next id going down. */
  async getReverse(req: temporal.api.workflowservice.v1.IGetWorkflowExecutionHistoryReverseRequest): Promise<Buffer> {
    const ns = this.engine.namespaces.get(req.namespace);
    const workflowId = req.execution?.workflowId;
    if (!workflowId) throw invalidArgument('WorkflowId is not set on request.');
    const token = decodePageToken(req.nextPageToken);
    const exec = await this.engine.readRun(ns.name, workflowId, token?.rid || req.execution?.runId);
    const from = Math.min(token?.next ?? exec.history.length, exec.history.length);
    const pageSize = req.maximumPageSize && req.maximumPageSize > 0 ? req.maximumPageSize : HISTORY_PAGE_SIZE;
    const low = Math.max(1, from - pageSize + 1);
    const events = exec.history.slice(low - 1, from).reverse();
    const next = low > 1 ? encodePageToken({ rid: exec.s.runId, next: low - 1 }) : undefined;
    return encodeWithHistory(ws.GetWorkflowExecutionHistoryReverseResponse, { nextPageToken: next }, 1, events);
  }
}
