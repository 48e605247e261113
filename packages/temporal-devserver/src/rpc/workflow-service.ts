/**
 * temporal.api.workflowservice.v1.WorkflowService: method name -> engine call. Only translation
 * lives here; behaviour lives in the engine.
 */
import { enums, type Loose, msToDur, type temporal } from '../proto';
import type { ActivityTasks } from '../engine/activity-tasks';
import type { Engine } from '../engine/engine';
import type { HistoryReader } from '../engine/history-reader';
import { newNamespace, type NamespaceRecord, SYSTEM_SEARCH_ATTRIBUTES } from '../engine/namespaces';
import type { VisibilityService } from '../engine/visibility-service';
import type { WorkflowOperations } from '../engine/workflow-operations';
import type { WorkflowTasks } from '../engine/workflow-tasks';
import type { WorkflowUpdates } from '../engine/updates';
import type { Scheduler } from '../schedules/scheduler';
import { durToMs } from '../proto';
import { invalidArgument } from './errors';
import type { Handlers } from './grpc-server';

/** The Temporal server version we answer like; the SDK only checks capabilities. */
export const SERVER_VERSION = '1.27.0';

export interface ServiceParts {
  engine: Engine;
  ops: WorkflowOperations;
  updates: WorkflowUpdates;
  scheduler: Scheduler;
  workflowTasks: WorkflowTasks;
  activityTasks: ActivityTasks;
  history: HistoryReader;
  visibility: VisibilityService;
  saveNamespace(ns: NamespaceRecord): Promise<void>;
}

export function describeNamespace(ns: NamespaceRecord): Loose<temporal.api.workflowservice.v1.IDescribeNamespaceResponse> {
  return {
    namespaceInfo: {
      name: ns.name,
      state: enums.NamespaceState.NAMESPACE_STATE_REGISTERED,
      description: ns.description,
      ownerEmail: ns.ownerEmail,
      data: ns.data,
      id: ns.id,
      // ShutdownWorker answers the worker's waiting polls, so it stops at once without cancelling them.
      capabilities: { eagerWorkflowStart: false, syncUpdate: true, asyncUpdate: true, workerPollCompleteOnShutdown: true },
      supportsSchedules: true,
    },
    config: {
      workflowExecutionRetentionTtl: msToDur(ns.retentionMs),
      historyArchivalState: enums.ArchivalState.ARCHIVAL_STATE_DISABLED,
      visibilityArchivalState: enums.ArchivalState.ARCHIVAL_STATE_DISABLED,
    },
    replicationConfig: { activeClusterName: 'active', clusters: [{ clusterName: 'active' }] },
    failoverVersion: 0,
    isGlobalNamespace: false,
  };
}

/** What GetSystemInfo answers: the capabilities the SDK checks before relying on them. */
const systemInfo = () => ({
  serverVersion: SERVER_VERSION,
  capabilities: {
    signalAndQueryHeader: true,
    internalErrorDifferentiation: true,
    activityFailureIncludeHeartbeat: true,
    supportsSchedules: true,
    encodedFailureAttributes: true,
    buildIdBasedVersioning: false,
    upsertMemo: true,
    eagerWorkflowStart: false,
    // Without it the worker stops sending SDK flags, which changes replay behaviour.
    sdkMetadata: true,
    countGroupByExecutionStatus: true,
    nexus: false,
  },
});

export function workflowServiceHandlers(p: ServiceParts): Handlers {
  const { engine, ops, updates, scheduler, workflowTasks, activityTasks, history, visibility } = p;
  return {
    // The worker's core gzips its requests; like Temporal, the server takes them (grpc-js inflates them).
    GetSystemInfo: () => systemInfo(),
    GetClusterInfo: () => ({
      supportedClients: { 'temporal-cli': '< 2.0.0', 'temporal-go': '< 2.0.0', 'temporal-typescript': '< 2.0.0' },
      serverVersion: SERVER_VERSION,
      clusterId: 'postbox-dev-server',
      clusterName: 'active',
      historyShardCount: 1,
      persistenceStore: engine.durable ? 'postgres' : 'memory',
      visibilityStore: engine.durable ? 'postgres' : 'memory',
      versionInfo: { current: { version: SERVER_VERSION } },
    }),
    DescribeNamespace: (req: temporal.api.workflowservice.v1.IDescribeNamespaceRequest) => {
      const byId = req.id ? engine.namespaces.list().find((n) => n.id === req.id) : undefined;
      return describeNamespace(byId ?? engine.namespaces.get(req.namespace));
    },
    ListNamespaces: () => ({ namespaces: engine.namespaces.list().map(describeNamespace) }),
    RegisterNamespace: async (req: temporal.api.workflowservice.v1.IRegisterNamespaceRequest) => {
      if (!req.namespace) throw invalidArgument('Namespace is not set on request.');
      const ns = newNamespace(req.namespace, durToMs(req.workflowExecutionRetentionPeriod) || undefined);
      ns.description = req.description ?? '';
      ns.ownerEmail = req.ownerEmail ?? '';
      ns.data = { ...(req.data ?? {}) };
      engine.namespaces.register(ns);
      await p.saveNamespace(ns);
      return {};
    },
    GetSearchAttributes: () => {
      const keys: Record<string, number> = { ...SYSTEM_SEARCH_ATTRIBUTES };
      for (const ns of engine.namespaces.list()) Object.assign(keys, ns.searchAttributes);
      return { keys };
    },

    StartWorkflowExecution: (req) => ops.start(req),
    SignalWorkflowExecution: (req) => ops.signal(req),
    SignalWithStartWorkflowExecution: (req) => ops.signalWithStart(req),
    RequestCancelWorkflowExecution: (req) => ops.requestCancel(req),
    TerminateWorkflowExecution: (req) => ops.terminate(req),
    DescribeWorkflowExecution: (req) => ops.describe(req),
    GetWorkflowExecutionHistory: (req, ctx) => history.get(req, ctx),
    GetWorkflowExecutionHistoryReverse: (req) => history.getReverse(req),
    QueryWorkflow: (req, ctx) => workflowTasks.query(req, ctx),
    UpdateWorkflowExecution: (req, ctx) => updates.update(req, ctx),
    PollWorkflowExecutionUpdate: (req, ctx) => updates.poll(req, ctx),
    ExecuteMultiOperation: (req, ctx) => updates.updateWithStart(req, ctx),

    CreateSchedule: (req) => scheduler.create(req),
    DescribeSchedule: (req) => scheduler.describe(req),
    UpdateSchedule: (req) => scheduler.update(req),
    PatchSchedule: (req) => scheduler.patch(req),
    DeleteSchedule: (req) => scheduler.delete(req),
    ListSchedules: (req) => scheduler.list(req),
    ListScheduleMatchingTimes: (req) => scheduler.matchingTimes(req),

    PollWorkflowTaskQueue: (req, ctx) => workflowTasks.poll(req, ctx),
    RespondWorkflowTaskCompleted: (req) => workflowTasks.complete(req),
    RespondWorkflowTaskFailed: (req) => workflowTasks.fail(req),
    RespondQueryTaskCompleted: (req) => workflowTasks.respondQueryTask(req),
    ResetStickyTaskQueue: () => ({}),

    PollActivityTaskQueue: (req, ctx) => activityTasks.poll(req, ctx),
    RecordActivityTaskHeartbeat: (req) => activityTasks.recordHeartbeat(req),
    RecordActivityTaskHeartbeatById: (req) => activityTasks.recordHeartbeatById(req),
    RespondActivityTaskCompleted: (req) => activityTasks.completed(req),
    RespondActivityTaskCompletedById: (req) => activityTasks.completedById(req),
    RespondActivityTaskFailed: (req) => activityTasks.failed(req),
    RespondActivityTaskFailedById: (req) => activityTasks.failedById(req),
    RespondActivityTaskCanceled: (req) => activityTasks.canceled(req),
    RespondActivityTaskCanceledById: (req) => activityTasks.canceledById(req),

    ListWorkflowExecutions: (req) => visibility.list(req),
    ScanWorkflowExecutions: (req) => visibility.list(req),
    CountWorkflowExecutions: (req) => visibility.count(req),

    ShutdownWorker: (req: temporal.api.workflowservice.v1.IShutdownWorkerRequest) => {
      const ns = engine.namespaces.get(req.namespace).name;
      if (req.stickyTaskQueue) workflowTasks.releaseSticky(ns, req.stickyTaskQueue);
      engine.matching.completeWorkerPolls(ns, {
        workerInstanceKey: req.workerInstanceKey || undefined,
        identity: req.identity || undefined,
        taskQueue: req.taskQueue || undefined,
      });
      return {};
    },
    DescribeTaskQueue: (req: temporal.api.workflowservice.v1.IDescribeTaskQueueRequest) => {
      const ns = engine.namespaces.get(req.namespace);
      const kind = req.taskQueueType === enums.TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY ? 'activity' : 'workflow';
      const name = req.taskQueue?.name ?? '';
      return {
        pollers: engine.matching.pollers(ns.name, kind, name).map((poller) => ({
          identity: poller.identity,
          lastAccessTime: { seconds: Math.floor(poller.lastAccessTime / 1000), nanos: (poller.lastAccessTime % 1000) * 1e6 },
        })),
        taskQueueStatus: { backlogCountHint: engine.matching.backlog(ns.name, kind, name) },
      };
    },
  };
}
