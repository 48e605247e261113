/**
 * The conformance suite: what the real SDK (client and worker) observes of the server, RPC family
 * by RPC family. Test files run it against differently configured servers (memory, durable,
 * uncached worker) or, with TEMPORAL_ADDRESS, against a real Temporal for comparison.
 */
import { status } from '@grpc/grpc-js';
import Long from 'long';
import {
  ScheduleAlreadyRunning,
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  WithStartWorkflowOperation,
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  WorkflowUpdateStage,
  type WorkflowHandle,
} from '@temporalio/client';
import { CancelledFailure, defineSearchAttributeKey, SearchAttributeType, TerminatedFailure } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { Worker, type WorkerOptions, type WorkflowBundle } from '@temporalio/worker';
import type { DevServerOptions } from '../src';
import * as workflows from './fixtures/workflows';
import { bundleWorkflows, eventually, registerSearchAttributes, TestEnv, uid } from './helpers/env';

const enums = temporal.api.enums.v1;
const ProjectId = defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD);
const CampaignId = defineSearchAttributeKey('CampaignId', SearchAttributeType.KEYWORD);

export interface ConformanceOptions {
  server?: () => Promise<DevServerOptions> | DevServerOptions;
  worker?: Partial<WorkerOptions>;
  /** Run only the parts that matter for this configuration (keeps the whole suite quick). */
  only?: Array<'system' | 'start' | 'commands' | 'activities' | 'children' | 'queries' | 'updates' | 'schedules' | 'visibility' | 'history'>;
}

export function conformanceSuite(title: string, options: ConformanceOptions = {}): void {
  const part = (name: NonNullable<ConformanceOptions['only']>[number]) => (options.only && !options.only.includes(name) ? describe.skip : describe);

  describe(title, () => {
    let bundle: WorkflowBundle;
    let env: TestEnv;
    // Loosely typed on purpose: tests pass start options of every kind through here.
    const start = (fn: (...args: any[]) => Promise<any>, args: unknown[], extra: Record<string, unknown> = {}) =>
      env.client.workflow.start(fn, { taskQueue: env.taskQueue, workflowId: uid(fn.name), args, ...extra } as never);

    beforeAll(async () => {
      bundle = await bundleWorkflows();
      env = await TestEnv.create({ bundle, server: await options.server?.(), worker: options.worker });
      await registerSearchAttributes(env.connection, env.namespace);
      await env.startWorker();
    });

    afterAll(async () => {
      // Every history this suite produced must replay without nondeterminism.
      let t = Date.now();
      const histories = await env.closedHistories();
      if (process.env.TEST_TIMING) console.log('histories', histories.length, Date.now() - t);
      t = Date.now();
      const failures: string[] = [];
      for await (const r of Worker.runReplayHistories({ workflowBundle: bundle, replayName: title }, histories)) {
        if (r.error) failures.push(`${r.workflowId}: ${r.error.message}`);
      }
      if (process.env.TEST_TIMING) console.log('replay', Date.now() - t);
      t = Date.now();
      await env.teardown();
      if (process.env.TEST_TIMING) console.log('teardown', Date.now() - t);
      expect(histories.length).toBeGreaterThan(0);
      expect(failures).toEqual([]);
    });

    part('system')('system and namespaces', () => {
      test('GetSystemInfo advertises what the SDK checks', async () => {
        const info = await env.connection.workflowService.getSystemInfo({});
        expect(info.capabilities).toMatchObject({ sdkMetadata: true, signalAndQueryHeader: true, internalErrorDifferentiation: true, upsertMemo: true });
      });

      test('namespaces: describe default, register, list, unknown is NOT_FOUND', async () => {
        const ws = env.connection.workflowService;
        const d = await ws.describeNamespace({ namespace: env.namespace });
        expect(d.namespaceInfo?.name).toBe(env.namespace);
        expect(d.namespaceInfo?.state).toBe(enums.NamespaceState.NAMESPACE_STATE_REGISTERED);
        const name = uid('ns');
        await ws.registerNamespace({ namespace: name, workflowExecutionRetentionPeriod: { seconds: Long.fromNumber(86400) } });
        await eventually(async () => {
          const list = await ws.listNamespaces({});
          expect(list.namespaces.map((n) => n.namespaceInfo?.name)).toContain(name);
        });
        await expect(ws.describeNamespace({ namespace: uid('missing') })).rejects.toMatchObject({ code: status.NOT_FOUND });
        const cluster = await ws.getClusterInfo({});
        expect(cluster.serverVersion).toBeTruthy();
      });
    });

    part('start')('starting and addressing workflows', () => {
      test('start, result and describe', async () => {
        const handle = await start(workflows.echoWorkflow, ['hello']);
        expect(await handle.result()).toBe('hello');
        const d = await handle.describe();
        expect(d.status.name).toBe('COMPLETED');
        expect(d.type).toBe('echoWorkflow');
        expect(d.taskQueue).toBe(env.taskQueue);
        expect(d.historyLength).toBeGreaterThan(5);
        expect(d.closeTime).toBeInstanceOf(Date);
      });

      test('duplicate start fails with WorkflowExecutionAlreadyStartedError', async () => {
        const handle = await start(workflows.waitForSignal, []);
        await expect(env.client.workflow.start(workflows.waitForSignal, { taskQueue: env.taskQueue, workflowId: handle.workflowId })).rejects.toBeInstanceOf(
          WorkflowExecutionAlreadyStartedError,
        );
        await handle.terminate('done');
      });

      test('id conflict policies: USE_EXISTING returns the running run, TERMINATE_EXISTING replaces it', async () => {
        const first = await start(workflows.waitForSignal, []);
        const same = await env.client.workflow.start(workflows.waitForSignal, {
          taskQueue: env.taskQueue,
          workflowId: first.workflowId,
          workflowIdConflictPolicy: 'USE_EXISTING',
        });
        expect(same.firstExecutionRunId).toBe(first.firstExecutionRunId);
        const replaced = await env.client.workflow.start(workflows.waitForSignal, {
          taskQueue: env.taskQueue,
          workflowId: first.workflowId,
          workflowIdConflictPolicy: 'TERMINATE_EXISTING',
        });
        expect(replaced.firstExecutionRunId).not.toBe(first.firstExecutionRunId);
        expect((await env.client.workflow.getHandle(first.workflowId, first.firstExecutionRunId).describe()).status.name).toBe('TERMINATED');
        await replaced.terminate('done');
      });

      test('id reuse policies after the run closed', async () => {
        const completed = await start(workflows.echoWorkflow, ['x']);
        await completed.result();
        const again = (policy: 'REJECT_DUPLICATE' | 'ALLOW_DUPLICATE_FAILED_ONLY' | 'ALLOW_DUPLICATE', id: string) =>
          env.client.workflow.start(workflows.echoWorkflow, { taskQueue: env.taskQueue, workflowId: id, args: ['y'], workflowIdReusePolicy: policy });
        await expect(again('REJECT_DUPLICATE', completed.workflowId)).rejects.toBeInstanceOf(WorkflowExecutionAlreadyStartedError);
        await expect(again('ALLOW_DUPLICATE_FAILED_ONLY', completed.workflowId)).rejects.toBeInstanceOf(WorkflowExecutionAlreadyStartedError);
        expect(await (await again('ALLOW_DUPLICATE', completed.workflowId)).result()).toBe('y');

        const failed = await start(workflows.failingWorkflow, []);
        await expect(failed.result()).rejects.toBeInstanceOf(WorkflowFailedError);
        const retried = await env.client.workflow.start(workflows.echoWorkflow, {
          taskQueue: env.taskQueue,
          workflowId: failed.workflowId,
          args: ['after failure'],
          workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
        });
        expect(await retried.result()).toBe('after failure');
      });

      test('a repeated start request id returns the same run', async () => {
        const ws = env.connection.workflowService;
        const workflowId = uid('dedupe');
        const req = {
          namespace: env.namespace,
          workflowId,
          workflowType: { name: 'waitForSignal' },
          taskQueue: { name: env.taskQueue },
          requestId: uid('request'),
          identity: 'conformance',
        };
        const a = await ws.startWorkflowExecution(req);
        const b = await ws.startWorkflowExecution(req);
        expect(b.runId).toBe(a.runId);
        await env.client.workflow.getHandle(workflowId).terminate('done');
      });

      test('start delay postpones the first workflow task', async () => {
        const handle = await start(workflows.echoWorkflow, ['late'], { startDelay: '1500ms' });
        const d = await handle.describe();
        expect(d.executionTime!.getTime() - d.startTime.getTime()).toBeGreaterThanOrEqual(1400);
        expect(await handle.result()).toBe('late');
        const history = await handle.fetchHistory();
        const started = history.events!.find((e) => e.workflowTaskStartedEventAttributes)!;
        const startTime = Number(history.events![0].eventTime!.seconds) * 1000;
        expect(Number(started.eventTime!.seconds) * 1000 - startTime).toBeGreaterThanOrEqual(1000);
      });

      test('memo and search attributes given at start are visible', async () => {
        const projectId = uid('project');
        const handle = await start(workflows.waitForSignal, [], {
          memo: { owner: 'conformance', n: 3 },
          typedSearchAttributes: [{ key: ProjectId, value: projectId }],
        });
        const d = await handle.describe();
        expect(d.memo).toEqual({ owner: 'conformance', n: 3 });
        expect(d.typedSearchAttributes.get(ProjectId)).toBe(projectId);
        await handle.signal(workflows.unblock, 'test');
        await handle.result();
      });

      test('signals arrive in order; signal to a closed workflow is NOT_FOUND', async () => {
        const handle = await start(workflows.collectSignals, [3]);
        for (const v of ['a', 'b', 'c']) await handle.signal(workflows.unblock, v);
        expect(await handle.result()).toEqual(['a', 'b', 'c']);
        await expect(handle.signal(workflows.unblock, 'late')).rejects.toBeInstanceOf(WorkflowNotFoundError);
      });

      test('signalWithStart starts a workflow, then signals the running one', async () => {
        const workflowId = uid('sws');
        const first = await env.client.workflow.signalWithStart(workflows.collectSignals, {
          taskQueue: env.taskQueue,
          workflowId,
          args: [2],
          signal: workflows.unblock,
          signalArgs: ['one'],
        });
        const second = await env.client.workflow.signalWithStart(workflows.collectSignals, {
          taskQueue: env.taskQueue,
          workflowId,
          args: [2],
          signal: workflows.unblock,
          signalArgs: ['two'],
        });
        expect(second.signaledRunId).toBe(first.signaledRunId);
        expect(await first.result()).toEqual(['one', 'two']);
      });

      test('cancellation runs cleanup and ends the run as canceled', async () => {
        const handle = await start(workflows.cancellable, []);
        await eventually(async () => expect((await handle.describe()).historyLength).toBeGreaterThan(3));
        await handle.cancel();
        const err = await handle.result().catch((e) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        expect(err.cause).toBeInstanceOf(CancelledFailure);
        expect((await handle.describe()).status.name).toBe('CANCELLED');
        const events = (await handle.fetchHistory()).events!;
        expect(events.some((e) => e.activityTaskCompletedEventAttributes)).toBe(true);
      });

      test('terminate closes the run; the result reports it', async () => {
        const handle = await start(workflows.waitForSignal, []);
        await handle.terminate('because');
        const err = await handle.result().catch((e) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        expect(err.cause).toBeInstanceOf(TerminatedFailure);
        expect((await handle.describe()).status.name).toBe('TERMINATED');
        await expect(handle.terminate('again')).rejects.toBeInstanceOf(WorkflowNotFoundError);
      });

      test('unknown workflow ids are NOT_FOUND', async () => {
        const handle = env.client.workflow.getHandle(uid('missing'));
        await expect(handle.describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
        await expect(handle.signal(workflows.unblock, 'x')).rejects.toBeInstanceOf(WorkflowNotFoundError);
      });

      test('describe of a running workflow shows pending work', async () => {
        const handle = await start(workflows.activityScenario, ['async-complete']);
        const d = await eventually(async () => {
          const desc = await handle.describe();
          const pending = desc.raw.pendingActivities ?? [];
          expect(pending).toHaveLength(1);
          return desc;
        });
        expect(d.status.name).toBe('RUNNING');
        expect(d.raw.pendingActivities![0].activityType?.name).toBe('completeLater');
        const c = await eventually(async () => {
          const found = env.asyncCompletions.find((a) => a.workflowId === handle.workflowId);
          if (!found) throw new Error('not yet');
          return found;
        });
        await env.client.activity.complete(c.taskToken, 'completed asynchronously');
        expect(await handle.result()).toEqual({ result: 'completed asynchronously' });
      });
    });

    part('commands')('workflow task commands', () => {
      test('timers: start and fire, start and cancel', async () => {
        expect(await (await start(workflows.sleeper, [50])).result()).toBe('slept 50');
        const handle = await start(workflows.cancelledTimer, []);
        expect(await handle.result()).toBe('timer cancelled');
        const events = (await handle.fetchHistory()).events!;
        expect(events.some((e) => e.timerCanceledEventAttributes)).toBe(true);
      });

      test('complete, fail, retry a workflow under its retry policy', async () => {
        const failed = await start(workflows.failingWorkflow, []);
        const err = await failed.result().catch((e) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        expect(err.cause?.message).toBe('workflow failed on purpose');
        const retried = await start(workflows.retriedWorkflow, [], { retry: { initialInterval: 50, maximumAttempts: 5 } });
        expect(await retried.result()).toBe(3);
      });

      test('run timeout closes the run as timed out', async () => {
        const handle = await start(workflows.waitForSignal, [], { workflowRunTimeout: '700ms' });
        const err = await handle.result().catch((e) => e);
        expect(err).toBeInstanceOf(WorkflowFailedError);
        expect(err.cause?.name).toBe('TimeoutFailure');
        expect((await handle.describe()).status.name).toBe('TIMED_OUT');
      });

      test('continue-as-new chains runs; the result follows them', async () => {
        const handle = await start(workflows.continueAsNewLoop, [3]);
        expect(await handle.result()).toBe(3);
        const firstRun = env.client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
        expect((await firstRun.describe()).status.name).toBe('CONTINUED_AS_NEW');
        const last = await env.client.workflow.getHandle(handle.workflowId).describe();
        expect(last.runId).not.toBe(handle.firstExecutionRunId);
      });

      test('markers from patches and local activities', async () => {
        const handle = await start(workflows.markers, []);
        expect(await handle.result()).toBe('true:local');
        const markers = (await handle.fetchHistory()).events!.filter((e) => e.markerRecordedEventAttributes);
        expect(markers.length).toBeGreaterThanOrEqual(2);
      });

      test('upserted search attributes and memo are visible and queryable', async () => {
        const projectId = uid('project');
        const handle = await start(workflows.upsertProperties, [projectId], { memo: { removed: 'soon', kept: 1 } });
        await eventually(async () => {
          const d = await handle.describe();
          expect(d.typedSearchAttributes.get(ProjectId)).toBe(projectId);
          expect(d.typedSearchAttributes.get(CampaignId)).toBe('campaign-upserted');
          expect(d.memo).toEqual({ stage: 'upserted', kept: 1 });
        });
        await eventually(async () => {
          const ids: string[] = [];
          for await (const w of env.client.workflow.list({ query: `ProjectId = '${projectId}'` })) ids.push(w.workflowId);
          expect(ids).toEqual([handle.workflowId]);
        });
        await handle.signal(workflows.unblock, 'done');
        await handle.result();
      });

      test('signal and cancel external workflows', async () => {
        const target = await start(workflows.waitForSignal, []);
        expect(await (await start(workflows.signalExternal, [target.workflowId])).result()).toBe('signalled');
        expect(await target.result()).toBe('unblocked by external');
        expect(await (await start(workflows.signalMissing, [])).result()).toMatch(/^failed/);

        const victim = await start(workflows.cancellable, []);
        await eventually(async () => expect((await victim.describe()).historyLength).toBeGreaterThan(3));
        expect(await (await start(workflows.cancelExternal, [victim.workflowId])).result()).toBe('cancel requested');
        await expect(victim.result()).rejects.toBeInstanceOf(WorkflowFailedError);
        expect((await victim.describe()).status.name).toBe('CANCELLED');
      });

      test('a completion racing a signal fails with UNHANDLED_COMMAND; the retry sees the signal', async () => {
        const handle = await start(workflows.completesAfterLocalActivity, []);
        await new Promise((r) => setTimeout(r, 400));
        await handle.signal(workflows.unblock, 'late');
        expect(await handle.result()).toEqual(['late']);
        const failed = (await handle.fetchHistory()).events!.filter((e) => e.workflowTaskFailedEventAttributes);
        expect(failed.map((e) => e.workflowTaskFailedEventAttributes!.cause)).toContain(
          enums.WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
        );
      });

      test('workflow task failures are retried until the workflow recovers', async () => {
        const handle = await start(workflows.flakyWorkflowTask, [], { workflowTaskTimeout: '1s' });
        await eventually(async () => {
          const d = await handle.describe();
          expect(d.raw.pendingWorkflowTask?.attempt ?? 0).toBeGreaterThan(1);
        });
        const events = (await handle.fetchHistory()).events!;
        expect(events.some((e) => e.workflowTaskFailedEventAttributes)).toBe(true);
        await handle.signal(workflows.unblock, 'fix');
        expect(await handle.result()).toBe('recovered');
      });
    });

    part('activities')('activities: retries, timeouts, cancellation', () => {
      const scenario = async (kind: string) => (await start(workflows.activityScenario, [kind])).result();

      test('retries with backoff until success', async () => {
        expect(await scenario('retry-then-succeed')).toEqual({ result: 3 });
      });

      test('maximum attempts, non-retryable types and flags', async () => {
        expect(await scenario('maximum-attempts')).toMatchObject({
          failure: 'ActivityFailure',
          cause: 'ApplicationFailure',
          retryState: 'MAXIMUM_ATTEMPTS_REACHED',
        });
        expect(await scenario('non-retryable-type')).toMatchObject({ cause: 'ApplicationFailure', retryState: 'NON_RETRYABLE_FAILURE' });
        expect(await scenario('non-retryable-flag')).toMatchObject({ cause: 'ApplicationFailure', retryState: 'NON_RETRYABLE_FAILURE' });
      });

      test('schedule-to-start timeout', async () => {
        expect(await scenario('schedule-to-start')).toMatchObject({ cause: 'TimeoutFailure', timeoutType: 'SCHEDULE_TO_START', retryState: 'TIMEOUT' });
      });

      test('only schedule-to-close, and no worker takes the task: schedule-to-start (its default) fires first', async () => {
        expect(await scenario('schedule-to-close-only-unpolled')).toMatchObject({
          cause: 'TimeoutFailure',
          timeoutType: 'SCHEDULE_TO_START',
          retryState: 'TIMEOUT',
        });
      });

      test('start-to-close timeout, retried then given up', async () => {
        expect(await scenario('start-to-close')).toMatchObject({
          cause: 'TimeoutFailure',
          timeoutType: 'START_TO_CLOSE',
          retryState: 'MAXIMUM_ATTEMPTS_REACHED',
        });
      });

      test('schedule-to-close timeout carries the last failure', async () => {
        const handle = await start(workflows.activityScenario, ['schedule-to-close']);
        expect(await handle.result()).toMatchObject({ cause: 'TimeoutFailure', timeoutType: 'SCHEDULE_TO_CLOSE', retryState: 'TIMEOUT' });
        // The TypeScript SDK drops a TimeoutFailure's cause, so read it from the history.
        const timedOut = (await handle.fetchHistory()).events!.find((e) => e.activityTaskTimedOutEventAttributes)!;
        expect(timedOut.activityTaskTimedOutEventAttributes!.failure?.cause?.message).toBe('first attempt fails');
      });

      test('heartbeat timeout, and heartbeat details reach the next attempt', async () => {
        expect(await scenario('heartbeat')).toMatchObject({ cause: 'TimeoutFailure', timeoutType: 'HEARTBEAT' });
        expect(await scenario('heartbeat-details-resume')).toEqual({ result: 'resumed from step-1 on attempt 2' });
      });

      test('cancelling a running activity reaches it through its heartbeat', async () => {
        const handle = await start(workflows.activityCancellation, []);
        expect(await handle.result()).toBe('activity cancelled');
        const events = (await handle.fetchHistory()).events!;
        expect(events.some((e) => e.activityTaskCancelRequestedEventAttributes)).toBe(true);
        expect(events.some((e) => e.activityTaskCanceledEventAttributes)).toBe(true);
      });

      test('asynchronous completion, heartbeat and failure by activity id', async () => {
        const handle = await start(workflows.activityScenario, ['async-complete']);
        const c = await eventually(async () => {
          const found = env.asyncCompletions.find((a) => a.workflowId === handle.workflowId);
          if (!found) throw new Error('not yet');
          return found;
        });
        const fullId = { workflowId: c.workflowId, runId: c.runId, activityId: c.activityId };
        await env.client.activity.heartbeat(fullId, 'still going');
        await env.client.activity.fail(fullId, new Error('failed by id'));
        // The default retry policy retries; the next attempt completes by id.
        const next = await eventually(async () => {
          const found = env.asyncCompletions.filter((a) => a.workflowId === handle.workflowId);
          if (found.length < 2) throw new Error('not yet');
          return found[1];
        });
        await env.client.activity.complete({ workflowId: next.workflowId, runId: next.runId, activityId: next.activityId }, 'done by id');
        expect(await handle.result()).toEqual({ result: 'done by id' });
      });

      test('local activities', async () => {
        expect(await scenario('local-activity')).toEqual({ result: 'local' });
      });
    });

    part('children')('child workflows', () => {
      const parent = async (kind: string, childId = uid('child')) => ({ childId, handle: await start(workflows.parentWorkflow, [kind, childId]) });

      test('child completes and fails; the parent sees both', async () => {
        const ok = await parent('complete');
        expect(await ok.handle.result()).toBe(`child ok ${ok.handle.workflowId}`);
        const child = await env.client.workflow.getHandle(ok.childId).describe();
        expect(child.parentExecution?.workflowId).toBe(ok.handle.workflowId);
        const failed = await parent('fail');
        expect(await failed.handle.result()).toBe('child failure: child failed');
      });

      test('child cancelled by the parent, child terminated from outside', async () => {
        expect(await (await parent('cancel')).handle.result()).toBe('child cancelled');
        const t = await parent('terminated');
        await eventually(async () => expect((await env.client.workflow.getHandle(t.childId).describe()).status.name).toBe('RUNNING'));
        await env.client.workflow.getHandle(t.childId).terminate('from outside');
        expect(await t.handle.result()).toBe('child terminated');
      });

      test('parent close policies: terminate, abandon, request cancel', async () => {
        const terminate = await parent('policy-terminate');
        const abandon = await parent('policy-abandon');
        const cancel = await parent('policy-request-cancel');
        for (const p of [terminate, abandon, cancel]) expect(await p.handle.result()).toBe('parent done');
        const statusOf = async (id: string) => (await env.client.workflow.getHandle(id).describe()).status.name;
        await eventually(async () => expect(await statusOf(terminate.childId)).toBe('TERMINATED'));
        await eventually(async () => expect(await statusOf(cancel.childId)).toBe('CANCELLED'));
        expect(await statusOf(abandon.childId)).toBe('RUNNING');
        await env.client.workflow.getHandle(abandon.childId).terminate('cleanup');
      });

      test('a child that times out', async () => {
        expect(await (await start(workflows.childWithRunTimeout, [uid('child')])).result()).toBe('child timed out');
      });

      test('starting a child whose id is taken fails in the parent', async () => {
        const existing = await start(workflows.waitForSignal, []);
        expect(await (await parent('already-started', existing.workflowId)).handle.result()).toBe('already started');
        await existing.terminate('cleanup');
      });
    });

    part('queries')('queries', () => {
      test('query a waiting workflow, right after a signal, and after it closed', async () => {
        const handle = await start(workflows.waitForSignal, []);
        expect(await handle.query(workflows.stateQuery)).toBe('waiting');
        await handle.signal(workflows.unblock, 'q');
        // Consistent: a query right after a signal sees it.
        expect(await handle.query(workflows.stateQuery)).toBe('got q');
        await handle.result();
        expect(await handle.query(workflows.stateQuery)).toBe('got q');
      });

      test('a failing query handler and an unknown query type are errors', async () => {
        const handle = await start(workflows.waitForSignal, []);
        await expect(handle.query(workflows.failingQuery)).rejects.toThrow(/query handler failed/);
        await expect(handle.query('no-such-query')).rejects.toThrow();
        await handle.terminate('done');
      });
    });

    part('updates')('workflow updates', () => {
      const Stage = enums.UpdateWorkflowExecutionLifecycleStage;
      const EventType = enums.EventType;

      test('a validator refuses, an accepted update answers and changes the workflow; only accepted updates are in the history', async () => {
        const handle = await start(workflows.updatable, []);
        const refused = await handle.executeUpdate(workflows.setValue, { args: ['bad'] }).catch((err) => err);
        expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
        expect(refused.cause.message).toBe('bad value refused');
        expect(await handle.executeUpdate(workflows.setValue, { args: ['one'] })).toBe('set one');
        expect(await handle.query(workflows.updateLog)).toEqual(['one']);
        await handle.signal(workflows.unblock, 'finish');
        expect(await handle.result()).toEqual(['one']);

        const events = (await handle.fetchHistory()).events ?? [];
        const accepted = events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED);
        const completed = events.filter((e) => e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED);
        expect(accepted).toHaveLength(1);
        expect(accepted[0].workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name).toBe('setValue');
        expect(completed).toHaveLength(1);
        expect(Long.fromValue(completed[0].workflowExecutionUpdateCompletedEventAttributes!.acceptedEventId!).toNumber()).toBe(
          Long.fromValue(accepted[0].eventId!).toNumber(),
        );
      });

      test('startUpdate answers once accepted; the result follows when the handler finishes (after a signal and an activity)', async () => {
        const handle = await start(workflows.updatable, []);
        const update = await handle.startUpdate(workflows.slowUpdate, { args: ['later'], waitForStage: WorkflowUpdateStage.ACCEPTED });
        // Asked without a stage to wait for, the server answers at once with the stage reached.
        const now = await env.connection.workflowService.pollWorkflowExecutionUpdate({
          namespace: env.namespace,
          updateRef: { workflowExecution: { workflowId: handle.workflowId }, updateId: update.updateId },
          waitPolicy: {},
        });
        expect(now.stage).toBe(Stage.UPDATE_WORKFLOW_EXECUTION_LIFECYCLE_STAGE_ACCEPTED);
        expect(now.outcome).toBeFalsy();
        await handle.signal(workflows.unblock, 'release');
        expect(await update.result()).toBe('slow later');
        await handle.signal(workflows.unblock, 'finish');
        expect(await handle.result()).toEqual(['later']);
      });

      test('one update id is applied once; a retry gets the first outcome, also after the workflow closed', async () => {
        const handle = await start(workflows.updatable, []);
        const updateId = uid('update');
        expect(await handle.executeUpdate(workflows.setValue, { args: ['once'], updateId })).toBe('set once');
        expect(await handle.executeUpdate(workflows.setValue, { args: ['twice'], updateId })).toBe('set once');
        await handle.signal(workflows.unblock, 'finish');
        expect(await handle.result()).toEqual(['once']);
        expect(await handle.executeUpdate(workflows.setValue, { args: ['after'], updateId })).toBe('set once');
        await expect(handle.executeUpdate(workflows.setValue, { args: ['new'] })).rejects.toBeInstanceOf(WorkflowNotFoundError);
        await expect(env.client.workflow.getHandle(uid('missing')).executeUpdate(workflows.setValue, { args: ['x'] })).rejects.toBeInstanceOf(
          WorkflowNotFoundError,
        );
      });

      test('an accepted update fails when its workflow closes before the handler finishes', async () => {
        const handle = await start(workflows.updatable, []);
        const update = await handle.startUpdate(workflows.slowUpdate, { args: ['never'], waitForStage: WorkflowUpdateStage.ACCEPTED });
        await handle.signal(workflows.unblock, 'finish');
        expect(await handle.result()).toEqual([]);
        const err = await update.result().catch((e) => e);
        expect(err).toBeInstanceOf(WorkflowUpdateFailedError);
        expect(err.cause.message).toMatch(/Workflow completed before the Update completed/);
      });

      test('update-with-start starts the workflow with the update, then updates the running one; FAIL refuses it', async () => {
        const workflowId = uid('update-with-start');
        const operation = (workflowIdConflictPolicy: 'USE_EXISTING' | 'FAIL') =>
          new WithStartWorkflowOperation(workflows.updatable, { workflowId, taskQueue: env.taskQueue, workflowIdConflictPolicy });
        const first = operation('USE_EXISTING');
        expect(await env.client.workflow.executeUpdateWithStart(workflows.setValue, { args: ['a'], startWorkflowOperation: first })).toBe('set a');
        const handle = await first.workflowHandle();
        const second = operation('USE_EXISTING');
        expect(await env.client.workflow.executeUpdateWithStart(workflows.setValue, { args: ['b'], startWorkflowOperation: second })).toBe('set b');
        expect((await (await second.workflowHandle()).describe()).runId).toBe((await handle.describe()).runId);
        const third = operation('FAIL');
        await expect(env.client.workflow.executeUpdateWithStart(workflows.setValue, { args: ['c'], startWorkflowOperation: third })).rejects.toBeInstanceOf(
          WorkflowExecutionAlreadyStartedError,
        );
        await handle.signal(workflows.unblock, 'finish');
        expect(await handle.result()).toEqual(['a', 'b']);
      });

      test('requests without an update id or name are INVALID_ARGUMENT', async () => {
        const handle = await start(workflows.updatable, []);
        const ws = env.connection.workflowService;
        const base = { namespace: env.namespace, workflowExecution: { workflowId: handle.workflowId } };
        await expect(ws.updateWorkflowExecution({ ...base, request: { input: { name: 'setValue' } } })).rejects.toMatchObject({
          code: status.INVALID_ARGUMENT,
        });
        await expect(ws.updateWorkflowExecution({ ...base, request: { meta: { updateId: 'u' }, input: {} } })).rejects.toMatchObject({
          code: status.INVALID_ARGUMENT,
        });
        await handle.terminate('done');
      });
    });

    part('schedules')('schedules and cron workflows', () => {
      const schedules = () => env.client.schedule;
      const startAction = (fn: (...args: any[]) => Promise<unknown>, args: unknown[], workflowId: string) => ({
        type: 'startWorkflow' as const,
        workflowType: fn,
        args,
        taskQueue: env.taskQueue,
        workflowId,
      });
      const runsOf = async (scheduleId: string) => {
        const out: { workflowId: string; status: string }[] = [];
        for await (const w of env.client.workflow.list({ query: `TemporalScheduledById = '${scheduleId}'` }))
          out.push({ workflowId: w.workflowId, status: w.status.name });
        return out;
      };

      test('an interval schedule starts its workflows (id + scheduled time, TemporalScheduledById) and describes them', async () => {
        const scheduleId = uid('every-second');
        const workflowId = uid('scheduled');
        const handle = await schedules().create({
          scheduleId,
          spec: { intervals: [{ every: '1s' }] },
          action: startAction(workflows.echoWorkflow, ['tick'], workflowId),
        });
        try {
          const desc = await eventually(async () => {
            const d = await handle.describe();
            expect(d.info.numActionsTaken).toBeGreaterThanOrEqual(2);
            return d;
          });
          expect(desc.action).toMatchObject({ workflowId, workflowType: 'echoWorkflow', args: ['tick'] });
          expect(desc.policies.overlap).toBe(ScheduleOverlapPolicy.SKIP);
          expect(desc.info.nextActionTimes.length).toBe(10);
          expect(desc.info.nextActionTimes[1].getTime() - desc.info.nextActionTimes[0].getTime()).toBe(1000);
          const recent = desc.info.recentActions[0];
          expect(recent.action.workflow.workflowId).toBe(`${workflowId}-${recent.scheduledAt.toISOString().replace('.000Z', 'Z')}`);
          await eventually(async () => {
            const runs = await runsOf(scheduleId);
            expect(runs.filter((r) => r.status === 'COMPLETED').length).toBeGreaterThanOrEqual(2);
            expect(runs.every((r) => r.workflowId.startsWith(`${workflowId}-`))).toBe(true);
          });
          expect(await env.client.workflow.getHandle(recent.action.workflow.workflowId).result()).toBe('tick');
          const listed: string[] = [];
          for await (const s of schedules().list()) listed.push(s.scheduleId);
          expect(listed).toContain(scheduleId);
        } finally {
          await handle.delete();
        }
        await expect(handle.describe()).rejects.toBeInstanceOf(ScheduleNotFoundError);
        // Counted as Temporal counts its scheduler workflows (the Web UI's "N Schedules").
        const division = async () => (await env.client.workflow.count(`TemporalNamespaceDivision = 'TemporalScheduler' AND ExecutionStatus = 'Running'`)).count;
        const before = await division();
        const other = await schedules().create({
          scheduleId: uid('counted'),
          spec: { intervals: [{ every: '1h' }] },
          action: startAction(workflows.echoWorkflow, [], uid('c')),
          state: { paused: true },
        });
        expect(await division()).toBe(before + 1);
        await other.delete();
        expect(await division()).toBe(before);
      });

      test('paused: notes, no scheduled actions; trigger and backfill still act, backfill on exactly the matching times', async () => {
        const scheduleId = uid('paused');
        const handle = await schedules().create({
          scheduleId,
          spec: { intervals: [{ every: '1m' }] },
          action: startAction(workflows.echoWorkflow, ['manual'], uid('manual')),
          state: { paused: true, note: 'created paused' },
        });
        try {
          await expect(
            schedules().create({ scheduleId, spec: { intervals: [{ every: '1h' }] }, action: startAction(workflows.echoWorkflow, [], uid('dup')) }),
          ).rejects.toBeInstanceOf(ScheduleAlreadyRunning);
          expect((await handle.describe()).state).toMatchObject({ paused: true, note: 'created paused' });
          await handle.unpause('back on');
          expect((await handle.describe()).state).toMatchObject({ paused: false, note: 'back on' });
          await handle.pause('off again');
          await handle.trigger();
          const start = new Date(Math.floor(Date.now() / 60_000) * 60_000 - 10 * 60_000);
          const end = new Date(start.getTime() + 3 * 60_000);
          await handle.backfill({ start, end, overlap: ScheduleOverlapPolicy.ALLOW_ALL });
          const matching = await env.connection.workflowService.listScheduleMatchingTimes({
            namespace: env.namespace,
            scheduleId,
            startTime: { seconds: Long.fromNumber(start.getTime() / 1000) },
            endTime: { seconds: Long.fromNumber(end.getTime() / 1000) },
          });
          // Both take the times after the range's start, up to and including its end.
          expect(matching.startTime.map((t) => Long.fromValue(t.seconds!).toNumber() * 1000)).toEqual([1, 2, 3].map((i) => start.getTime() + i * 60_000));
          const listed = async (query: string) => {
            const out: string[] = [];
            for await (const x of schedules().list({ query })) out.push(x.scheduleId);
            return out;
          };
          expect(await listed(`ScheduleId = '${scheduleId}' AND TemporalSchedulePaused = true`)).toEqual([scheduleId]);
          expect(await listed(`ScheduleId = '${scheduleId}' AND TemporalSchedulePaused = false`)).toEqual([]);
          const d = await handle.describe();
          expect(d.state).toMatchObject({ paused: true, note: 'off again' });
          expect(d.info.numActionsTaken).toBe(4);
          expect(d.info.recentActions.slice(1).map((a) => a.scheduledAt.getTime())).toEqual([1, 2, 3].map((i) => start.getTime() + i * 60_000));
          await eventually(async () => expect((await handle.describe()).info.runningActions).toEqual([]));
        } finally {
          await handle.delete();
        }
      });

      test('overlap: SKIP skips while its workflow runs, BUFFER_ONE starts the buffered one when it ends', async () => {
        const make = (overlap: ScheduleOverlapPolicy) =>
          schedules().create({
            scheduleId: uid(`overlap-${overlap}`),
            spec: { intervals: [{ every: '1s' }] },
            action: startAction(workflows.waitForSignal, [], uid('waiting')),
            policies: { overlap },
          });
        const skip = await make(ScheduleOverlapPolicy.SKIP);
        const buffer = await make(ScheduleOverlapPolicy.BUFFER_ONE);
        try {
          await eventually(async () => {
            expect((await skip.describe()).info.numActionsSkippedOverlap).toBeGreaterThanOrEqual(2);
            expect((await buffer.describe()).raw.info?.bufferDropped?.toNumber()).toBeGreaterThanOrEqual(1);
          });
          for (const h of [skip, buffer]) {
            const d = await h.describe();
            expect(d.info.numActionsTaken).toBe(1);
            expect(d.info.runningActions).toHaveLength(1);
          }
          await skip.pause();
          await buffer.pause();
          const bufferedFirst = (await buffer.describe()).info.runningActions[0].workflow.workflowId;
          await env.client.workflow.getHandle(bufferedFirst).signal(workflows.unblock, 'done');
          await eventually(async () => {
            const d = await buffer.describe();
            expect(d.info.numActionsTaken).toBe(2);
            expect(d.info.runningActions[0].workflow.workflowId).not.toBe(bufferedFirst);
          });
          const skipped = (await skip.describe()).info.runningActions[0].workflow.workflowId;
          await env.client.workflow.getHandle(skipped).signal(workflows.unblock, 'done');
          await eventually(async () => expect((await skip.describe()).info.runningActions).toEqual([]));
          expect((await skip.describe()).info.numActionsTaken).toBe(1);
        } finally {
          for (const h of [skip, buffer]) {
            for (const a of (await h.describe()).info.runningActions) await env.client.workflow.getHandle(a.workflow.workflowId).terminate('test over');
            await h.delete();
          }
        }
      });

      test('cron strings compile to calendars as Temporal describes them; a bad spec is refused', async () => {
        const handle = await schedules().create({
          scheduleId: uid('cron-spec'),
          spec: { cronExpressions: ['30 12 * * MON-FRI'] },
          action: startAction(workflows.echoWorkflow, [], uid('weekday')),
          state: { paused: true },
        });
        try {
          const d = await handle.describe();
          expect(d.spec.calendars).toEqual([
            expect.objectContaining({
              hour: [{ start: 12, end: 12, step: 1 }],
              minute: [{ start: 30, end: 30, step: 1 }],
              dayOfWeek: [{ start: 'MONDAY', end: 'FRIDAY', step: 1 }],
            }),
          ]);
          for (const t of d.info.nextActionTimes) {
            expect([t.getUTCHours(), t.getUTCMinutes()]).toEqual([12, 30]);
            expect([0, 6]).not.toContain(t.getUTCDay());
          }
        } finally {
          await handle.delete();
        }
        await expect(
          schedules().create({
            scheduleId: uid('bad'),
            spec: { cronExpressions: ['61 * * * *'] },
            action: startAction(workflows.echoWorkflow, [], uid('bad')),
          }),
        ).rejects.toThrow(TypeError);
      });

      test('a cron workflow runs again at each time, every run completed with the next one linked, until terminated', async () => {
        const handle = await start(workflows.cronRun, [], { cronSchedule: '@every 1s' });
        const runs = await eventually(async () => {
          const out = [];
          for await (const w of env.client.workflow.list({ query: `WorkflowId = '${handle.workflowId}' AND ExecutionStatus = 'Completed'` })) out.push(w);
          expect(out.length).toBeGreaterThanOrEqual(2);
          return out;
        });
        const first = runs.find((r) => r.runId === handle.firstExecutionRunId)!;
        expect(first.status.name).toBe('COMPLETED');
        // Each run's own result (following the chain would never end).
        const resultOf = (runId: string) => env.client.workflow.getHandle(handle.workflowId, runId, { followRuns: false }).result();
        expect(await resultOf(handle.firstExecutionRunId)).toBe('@every 1s after nothing');
        const second = runs.find((r) => r.runId !== handle.firstExecutionRunId)!;
        expect(await resultOf(second.runId)).toBe('@every 1s after a result');
        await handle.terminate('enough');
        const last = await env.client.workflow.getHandle(handle.workflowId).describe();
        expect(last.status.name).toBe('TERMINATED');
        await expect(start(workflows.cronRun, [], { cronSchedule: 'every day' })).rejects.toMatchObject({ cause: { code: status.INVALID_ARGUMENT } });
      });
    });

    part('visibility')('visibility', () => {
      test('list and count by type, status, custom keyword, IN, OR, parentheses, ORDER BY', async () => {
        const projectA = uid('pa');
        const projectB = uid('pb');
        const handles: WorkflowHandle[] = [];
        for (const [project, campaign] of [
          [projectA, 'c1'],
          [projectA, 'c2'],
          [projectB, 'c3'],
        ]) {
          handles.push(
            await start(workflows.waitForSignal, [], {
              typedSearchAttributes: [
                { key: ProjectId, value: project },
                { key: CampaignId, value: campaign },
              ],
            }),
          );
          await new Promise((r) => setTimeout(r, 20));
        }
        await handles[2].signal(workflows.unblock, 'finish');
        await handles[2].result();
        const ids = async (query: string) => {
          const out: string[] = [];
          for await (const w of env.client.workflow.list({ query })) out.push(w.workflowId);
          return out;
        };
        await eventually(async () => {
          expect(await ids(`ProjectId = '${projectA}' ORDER BY StartTime ASC`)).toEqual([handles[0].workflowId, handles[1].workflowId]);
          expect(await ids(`ProjectId = '${projectA}' ORDER BY StartTime DESC`)).toEqual([handles[1].workflowId, handles[0].workflowId]);
          expect(await ids(`ProjectId IN ('${projectA}', '${projectB}') AND ExecutionStatus = 'Running' ORDER BY StartTime ASC`)).toEqual([
            handles[0].workflowId,
            handles[1].workflowId,
          ]);
          expect(
            await ids(
              `WorkflowType = 'waitForSignal' AND (CampaignId = 'c1' OR CampaignId = 'c3') AND ` +
                `ProjectId IN ('${projectA}', '${projectB}') ORDER BY StartTime ASC`,
            ),
          ).toEqual([handles[0].workflowId, handles[2].workflowId]);
          expect(await ids(`WorkflowId = '${handles[1].workflowId}'`)).toEqual([handles[1].workflowId]);
          expect(await ids(`ProjectId = '${projectB}' AND ExecutionStatus = 'Completed'`)).toEqual([handles[2].workflowId]);
          const count = await env.client.workflow.count(`ProjectId IN ('${projectA}', '${projectB}')`);
          expect(count.count).toBe(3);
        });
        await expect(ids(`NoSuchAttribute = 'x'`)).rejects.toThrow();
        for (const h of handles.slice(0, 2)) await h.terminate('cleanup');
      });

      test('search attributes are registered and listed', async () => {
        const res = await env.connection.operatorService.listSearchAttributes({ namespace: env.namespace });
        expect(res.customAttributes).toMatchObject({
          ProjectId: enums.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
          CampaignId: enums.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
        });
        await expect(
          env.client.workflow.start(workflows.echoWorkflow, {
            taskQueue: env.taskQueue,
            workflowId: uid('bad-sa'),
            args: ['x'],
            searchAttributes: { NotRegistered: ['x'] },
          }),
        ).rejects.toThrow();
      });
    });

    part('history')('history', () => {
      test('long histories are paged (poll responses and GetWorkflowExecutionHistory)', async () => {
        const handle = await start(workflows.manyActivities, [400]);
        expect(await handle.result()).toBe(400);
        const ws = env.connection.workflowService;
        let pages = 0;
        let events = 0;
        let nextPageToken: Uint8Array | undefined;
        do {
          const res = await ws.getWorkflowExecutionHistory({
            namespace: env.namespace,
            execution: { workflowId: handle.workflowId },
            maximumPageSize: 500,
            nextPageToken,
          });
          pages++;
          events += res.history?.events?.length ?? 0;
          nextPageToken = res.nextPageToken?.length ? res.nextPageToken : undefined;
        } while (nextPageToken);
        expect(events).toBeGreaterThan(1200);
        expect(pages).toBeGreaterThan(2);
        expect((await handle.fetchHistory()).events!.length).toBe(events);
        const reverse = await ws.getWorkflowExecutionHistoryReverse({
          namespace: env.namespace,
          execution: { workflowId: handle.workflowId },
          maximumPageSize: 2,
        });
        expect(reverse.history?.events?.map((e) => Number(e.eventId))).toEqual([events, events - 1]);
        expect(reverse.history?.events?.[0].workflowExecutionCompletedEventAttributes).toBeTruthy();
      });
    });
  });
}
