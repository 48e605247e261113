/**
 * Workflow updates: admission (UpdateWorkflowExecution, update-with-start), delivery of the request
 * to the workflow inside a workflow task as a protocol message, the workflow's answers (Acceptance,
 * Rejection, Response messages ordered by PROTOCOL_MESSAGE commands) written as UpdateAccepted /
 * UpdateCompleted events, and clients waiting for a stage (PollWorkflowExecutionUpdate).
 *
 * Unlike Temporal, whose admitted updates live in memory only, admission is persisted with the run:
 * an update the client was told is admitted is delivered even after the server restarts.
 */
import { status as grpcStatus } from '@grpc/grpc-js';
import { decodeEvent, enums, type Loose, root, type temporal } from '../proto';
import { invalidArgument, notFound, RpcError, unavailable, workflowCompleted } from '../rpc/errors';
import { type CallContext, longPollWindow } from '../rpc/grpc-server';
import type { BadCompletion } from './commands';
import type { Engine, Tx } from './engine';
import type { Execution } from './execution';
import { EventType } from './history';
import type { UpdateRecord } from './state';
import type { WorkflowOperations } from './workflow-operations';

type IRequest = temporal.api.update.v1.IRequest;
type IOutcome = temporal.api.update.v1.IOutcome;
type IMessage = temporal.api.protocol.v1.IMessage;
type ICommand = temporal.api.command.v1.ICommand;

const Stage = enums.UpdateWorkflowExecutionLifecycleStage;
const Cause = enums.WorkflowTaskFailedCause;
const CT = enums.CommandType;
const updateV1 = 'temporal.api.update.v1';
const RequestType = root.lookupType(`${updateV1}.Request`);
const OutcomeType = root.lookupType(`${updateV1}.Outcome`);

/** Temporal's default limits: updates admitted or accepted but not completed, and all updates of a run. */
const MAX_IN_FLIGHT = 10;
const MAX_TOTAL = 2000;
/** Rejected updates are remembered (for a retry with the same id) only this many at a time. */
const MAX_REJECTED_KEPT = 50;
/** How long one UpdateWorkflowExecution / PollWorkflowExecutionUpdate call waits for the stage asked for. */
const WAIT_WINDOW_MS = 60_000;

const STAGE_OF: Record<UpdateRecord['stage'], number> = {
  admitted: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ADMITTED,
  accepted: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED,
  completed: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
  aborted: Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_COMPLETED,
};

function anyOf(typeName: string, value: Uint8Array): { type_url: string; value: Uint8Array } {
  return { type_url: `type.googleapis.com/${typeName}`, value };
}

// ------------------------------------------------------------------ one run's updates

export function findUpdate(exec: Execution, updateId: string): UpdateRecord | undefined {
  return exec.s.updates?.find((u) => u.updateId === updateId);
}

function admit(exec: Execution, request: IRequest): void {
  const updates = (exec.s.updates ??= []);
  const inFlight = updates.filter((u) => u.stage === 'admitted' || u.stage === 'accepted').length;
  if (inFlight >= MAX_IN_FLIGHT) {
    throw new RpcError(grpcStatus.RESOURCE_EXHAUSTED, `limit on number of concurrent in-flight updates has been reached (${MAX_IN_FLIGHT})`);
  }
  if (updates.length >= MAX_TOTAL) throw new RpcError(grpcStatus.FAILED_PRECONDITION, `limit on number of total updates has been reached (${MAX_TOTAL})`);
  updates.push({ updateId: request.meta!.updateId!, stage: 'admitted', request: Buffer.from(RequestType.encode(request).finish()).toString('base64') });
  exec.wakeWorkflow();
}

/**
 * The update requests a workflow task carries: every admitted one not yet given to this worker (a
 * sticky worker has the ones it was sent; a full history goes with all of them again).
 */
export function updateMessages(exec: Execution, seq: number, sticky: boolean, startedEventId: number): Loose<IMessage>[] {
  const out: Loose<IMessage>[] = [];
  for (const u of exec.s.updates ?? []) {
    if (u.stage !== 'admitted' || (sticky && u.sentSeq !== undefined)) continue;
    u.sentSeq = seq;
    out.push({
      id: `${u.updateId}/request`,
      protocolInstanceId: u.updateId,
      // Delivered after the task's Scheduled event, as Temporal sequences it.
      eventId: startedEventId - 1,
      body: anyOf(`${updateV1}.Request`, Buffer.from(u.request!, 'base64')),
    });
  }
  return out;
}

/** Updates admitted while the running task was out: the workflow must see them before it closes. */
export function hasUndeliveredUpdates(exec: Execution): boolean {
  return !!exec.s.updates?.some((u) => u.stage === 'admitted' && u.sentSeq === undefined);
}

/** After a restart no worker holds any request: all are sent again. */
export function forgetSentUpdates(exec: Execution): void {
  for (const u of exec.s.updates ?? []) u.sentSeq = undefined;
}

/**
 * The run closed: admitted updates are aborted (the client retries on the next run if this one
 * continued), accepted ones fail the way Temporal fails them.
 */
export function abortUpdates(exec: Execution, continued: boolean): void {
  for (const u of exec.s.updates ?? []) {
    if (u.stage === 'admitted') {
      u.stage = 'aborted';
      u.continued = continued || undefined;
      u.request = undefined;
      u.sentSeq = undefined;
    } else if (u.stage === 'accepted') {
      u.stage = 'completed';
      u.outcome = encodeOutcome({
        failure: {
          message: 'Workflow Update failed because the Workflow completed before the Update completed.',
          source: 'Server',
          applicationFailureInfo: { type: 'AcceptedUpdateCompletedWorkflow', nonRetryable: true },
        },
      });
    }
  }
}

function encodeOutcome(outcome: IOutcome): string {
  return Buffer.from(OutcomeType.encode(outcome).finish()).toString('base64');
}

export function updateOutcome(exec: Execution, u: UpdateRecord): IOutcome | undefined {
  if (u.outcome) return OutcomeType.decode(Buffer.from(u.outcome, 'base64')) as IOutcome;
  if (!u.completedEventId) return undefined;
  const bytes = exec.history[u.completedEventId - 1];
  return bytes ? (decodeEvent(bytes).workflowExecutionUpdateCompletedEventAttributes?.outcome ?? undefined) : undefined;
}

// ------------------------------------------------------------------ the workflow's answers

type Answer =
  | { kind: 'accept'; message: IMessage; body: temporal.api.update.v1.IAcceptance }
  | { kind: 'reject'; message: IMessage; body: temporal.api.update.v1.IRejection }
  | { kind: 'respond'; message: IMessage; body: temporal.api.update.v1.IResponse };

const ANSWER_KINDS: Record<string, Answer['kind']> = {
  [`${updateV1}.Acceptance`]: 'accept',
  [`${updateV1}.Rejection`]: 'reject',
  [`${updateV1}.Response`]: 'respond',
};

/** The protocol messages of one workflow task completion, checked before and applied with its commands. */
export class UpdateAnswers {
  private readonly byId = new Map<string, Answer>();
  private readonly applied = new Set<string>();
  private decodeError?: string;

  constructor(
    private readonly exec: Execution,
    messages: IMessage[],
  ) {
    for (const m of messages) {
      const typeName = (m.body?.type_url ?? '').replace(/^.*\//, '');
      const kind = ANSWER_KINDS[typeName];
      if (!m.id || !kind) {
        this.decodeError ??= `unsupported protocol message ${m.id ?? ''} of type ${typeName || '(none)'}`;
        continue;
      }
      try {
        const body = root.lookupType(typeName).decode(m.body!.value ?? new Uint8Array()) as never;
        this.byId.set(m.id, { kind, message: m, body });
      } catch {
        this.decodeError ??= `protocol message ${m.id} cannot be decoded`;
      }
    }
  }

  /** Messages in the order they take effect: at their PROTOCOL_MESSAGE command, the rest after all commands. */
  private order(commands: ICommand[]): { missing?: string; ordered: Answer[] } {
    const ordered: Answer[] = [];
    const seen = new Set<string>();
    for (const c of commands) {
      if (c.commandType !== CT.COMMAND_TYPE_PROTOCOL_MESSAGE) continue;
      const id = c.protocolMessageCommandAttributes?.messageId ?? '';
      const answer = this.byId.get(id);
      if (!answer) return { missing: id, ordered };
      if (!seen.has(id)) ordered.push(answer);
      seen.add(id);
    }
    for (const [id, answer] of this.byId) if (!seen.has(id)) ordered.push(answer);
    return { ordered };
  }

  validate(commands: ICommand[]): BadCompletion | undefined {
    const bad = (message: string): BadCompletion => ({ cause: Cause.WORKFLOW_TASK_FAILED_CAUSE_BAD_UPDATE_WORKFLOW_EXECUTION_MESSAGE, message });
    if (this.decodeError) return bad(this.decodeError);
    const { missing, ordered } = this.order(commands);
    if (missing !== undefined) return bad(`ProtocolMessageCommandAttributes.MessageId ${missing} refers to no message`);
    const stages = new Map<string, UpdateRecord['stage']>();
    for (const a of ordered) {
      const updateId = a.message.protocolInstanceId ?? '';
      const u = findUpdate(this.exec, updateId);
      const stage = stages.get(updateId) ?? u?.stage;
      if (!u) return bad(`update ${updateId} not found`);
      if (a.kind === 'respond') {
        if (stage !== 'accepted') return bad(`update ${updateId} cannot be completed: it was not accepted`);
        stages.set(updateId, 'completed');
      } else {
        if (stage !== 'admitted') return bad(`update ${updateId} cannot be ${a.kind}ed: it is ${stage}`);
        stages.set(updateId, a.kind === 'accept' ? 'accepted' : 'completed');
      }
    }
    return undefined;
  }

  /** Applies the message a PROTOCOL_MESSAGE command points at. */
  applyCommand(c: ICommand): void {
    const id = c.protocolMessageCommandAttributes?.messageId ?? '';
    const answer = this.byId.get(id);
    if (answer && !this.applied.has(id)) this.apply(answer);
  }

  /** Applies the messages no command pointed at (after all commands, as Temporal does). */
  applyRest(): void {
    for (const [id, answer] of this.byId) if (!this.applied.has(id)) this.apply(answer);
  }

  private apply(a: Answer): void {
    this.applied.add(a.message.id!);
    const exec = this.exec;
    if (!exec.running) return;
    const u = findUpdate(exec, a.message.protocolInstanceId ?? '')!;
    switch (a.kind) {
      case 'accept': {
        const request = a.body.acceptedRequest ?? (RequestType.decode(Buffer.from(u.request!, 'base64')) as IRequest);
        u.acceptedEventId = exec.appendEvent(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, {
          protocolInstanceId: u.updateId,
          acceptedRequestMessageId: a.body.acceptedRequestMessageId,
          acceptedRequestSequencingEventId: a.body.acceptedRequestSequencingEventId,
          acceptedRequest: request,
        });
        u.stage = 'accepted';
        u.request = undefined;
        u.sentSeq = undefined;
        break;
      }
      case 'reject':
        u.stage = 'completed';
        u.outcome = encodeOutcome({ failure: a.body.failure ?? { message: 'update rejected' } });
        u.request = undefined;
        u.sentSeq = undefined;
        forgetOldRejections(exec);
        break;
      case 'respond':
        u.completedEventId = exec.appendEvent(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED, {
          meta: a.body.meta ?? { updateId: u.updateId },
          acceptedEventId: u.acceptedEventId,
          outcome: a.body.outcome ?? undefined,
        });
        u.stage = 'completed';
        break;
    }
  }
}

/** Temporal forgets rejected updates at once; a few are kept so a client's retry sees the same answer. */
function forgetOldRejections(exec: Execution): void {
  const updates = exec.s.updates!;
  const rejected = updates.filter((u) => u.stage === 'completed' && u.outcome && !u.acceptedEventId);
  for (const u of rejected.slice(0, Math.max(0, rejected.length - MAX_REJECTED_KEPT))) updates.splice(updates.indexOf(u), 1);
}

// ------------------------------------------------------------------ client calls

type IUpdateRequest = temporal.api.workflowservice.v1.IUpdateWorkflowExecutionRequest;
type IUpdateResponse = temporal.api.workflowservice.v1.IUpdateWorkflowExecutionResponse;

export class WorkflowUpdates {
  constructor(
    private readonly engine: Engine,
    private readonly ops: WorkflowOperations,
  ) {}

  private static validate(req: IUpdateRequest): { workflowId: string; updateId: string; wanted: number } {
    const workflowId = req.workflowExecution?.workflowId;
    if (!workflowId) throw invalidArgument('WorkflowId is not set on request.');
    const updateId = req.request?.meta?.updateId;
    if (!updateId) throw invalidArgument('Update ID is not set on request.');
    if (!req.request?.input?.name) throw invalidArgument('Update name is not set on request.');
    // Unspecified waits for acceptance, as Temporal does.
    const wanted = req.waitPolicy?.lifecycleStage || Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED;
    return { workflowId, updateId, wanted };
  }

  /** Admits `req` on `exec` unless an update with its id exists there (then the caller attaches to it). */
  private admitOn(tx: Tx, exec: Execution, req: IUpdateRequest): void {
    if (findUpdate(exec, req.request!.meta!.updateId!)) return;
    admit(tx.touch(exec), req.request!);
  }

  async update(req: IUpdateRequest, ctx: CallContext): Promise<IUpdateResponse> {
    const ns = this.engine.namespaces.get(req.namespace);
    const { workflowId, updateId, wanted } = WorkflowUpdates.validate(req);
    const runId = req.workflowExecution?.runId;
    const found = await this.engine.readRun(ns.name, workflowId, runId);
    if (req.firstExecutionRunId && found.s.firstRunId !== req.firstExecutionRunId) throw notFound('workflow execution not found');
    if (!found.running) {
      // A retry of an update that completed before the run closed still gets its outcome.
      const u = findUpdate(found, updateId);
      if (u?.stage === 'completed') return this.answer(found, u);
      throw workflowCompleted();
    }
    const exec = await this.engine.run((tx) => {
      const run = this.engine.requireRunning(ns.name, workflowId, runId);
      this.admitOn(tx, run, req);
      return run;
    });
    return this.awaitStage(exec, updateId, wanted, ctx);
  }

  async poll(req: temporal.api.workflowservice.v1.IPollWorkflowExecutionUpdateRequest, ctx: CallContext): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    const ref = req.updateRef;
    if (!ref?.workflowExecution?.workflowId) throw invalidArgument('WorkflowId is not set on request.');
    if (!ref.updateId) throw invalidArgument('Update ID is not set on request.');
    const exec = await this.engine.readRun(ns.name, ref.workflowExecution.workflowId, ref.workflowExecution.runId);
    if (!findUpdate(exec, ref.updateId)) throw notFound(`update ${ref.updateId} not found`);
    // Unspecified answers at once with the stage reached.
    return this.awaitStage(exec, ref.updateId, req.waitPolicy?.lifecycleStage ?? 0, ctx);
  }

  /** ExecuteMultiOperation with [StartWorkflow, UpdateWorkflow]: start (or use) the run and admit the update in one operation. */
  async updateWithStart(req: temporal.api.workflowservice.v1.IExecuteMultiOperationRequest, ctx: CallContext): Promise<object> {
    const ns = this.engine.namespaces.get(req.namespace);
    const [first, second] = req.operations ?? [];
    const start = first?.startWorkflow;
    const update = second?.updateWorkflow;
    if (req.operations?.length !== 2 || !start || !update) {
      throw invalidArgument('ExecuteMultiOperation takes exactly two operations: StartWorkflow, then UpdateWorkflow.');
    }
    const { updateId, wanted } = WorkflowUpdates.validate(update);
    if (update.workflowExecution?.workflowId !== start.workflowId) throw invalidArgument('The update must address the workflow id being started.');
    if (update.workflowExecution?.runId || update.firstExecutionRunId) throw invalidArgument('The update of an update-with-start must not name a run.');
    if (start.namespace && start.namespace !== ns.name) throw invalidArgument('Both operations must be in the namespace of the request.');
    const prepared = await this.ops.prepareStart(ns, start);
    const started = await this.engine.run((tx) => {
      const result = prepared.startIn(tx);
      const exec = this.engine.currentExecution(ns.name, start.workflowId!);
      if (!exec?.running || exec.s.runId !== result.runId) throw workflowCompleted();
      this.admitOn(tx, exec, update);
      return { result, exec };
    });
    const updateResponse = await this.awaitStage(started.exec, updateId, wanted, ctx);
    return { responses: [{ startWorkflow: started.result }, { updateWorkflow: updateResponse }] };
  }

  /** Waits (within the call's window) until the update reaches `wanted`, then answers with the stage it is at. */
  private async awaitStage(exec: Execution, updateId: string, wanted: number, ctx: CallContext): Promise<IUpdateResponse> {
    const reached = (u: UpdateRecord | undefined) => !u || u.stage === 'aborted' || STAGE_OF[u.stage] >= wanted;
    let u = findUpdate(exec, updateId);
    if (!reached(u)) {
      const window = longPollWindow(ctx, WAIT_WINDOW_MS);
      u = await new Promise<UpdateRecord | undefined>((resolve) => {
        const finish = () => {
          clearTimeout(timer);
          exec.waiters.delete(check);
          resolve(findUpdate(exec, updateId));
        };
        const check = () => {
          if (reached(findUpdate(exec, updateId))) finish();
        };
        const timer = setTimeout(finish, window);
        ctx.onCancel(finish);
        exec.waiters.add(check);
      });
    }
    if (!u) throw notFound(`update ${updateId} not found`);
    if (u.stage === 'aborted') {
      throw u.continued ? unavailable('workflow continued as new before the update was delivered: retry on the new run') : workflowCompleted();
    }
    return this.answer(exec, u);
  }

  private answer(exec: Execution, u: UpdateRecord): IUpdateResponse {
    return {
      updateRef: { workflowExecution: { workflowId: exec.s.workflowId, runId: exec.s.runId }, updateId: u.updateId },
      stage: STAGE_OF[u.stage],
      outcome: u.stage === 'completed' ? updateOutcome(exec, u) : undefined,
    };
  }
}
