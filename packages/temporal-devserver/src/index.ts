/**
 * A Temporal-compatible development server: the real Temporal SDK (client and worker) talks to it
 * over gRPC as it would to a Temporal cluster. In memory for tests, or durable in PostgreSQL, with
 * optional time skipping (Temporal's test-server semantics) for tests of long-sleeping workflows.
 */
import * as grpc from '@grpc/grpc-js';
import pino from 'pino';
import { ActivityTasks } from './engine/activity-tasks';
import { Engine } from './engine/engine';
import { HistoryReader } from './engine/history-reader';
import { newNamespace, type NamespaceRecord } from './engine/namespaces';
import { TimerQueue } from './engine/timer-queue';
import { VisibilityService } from './engine/visibility-service';
import { WorkflowOperations } from './engine/workflow-operations';
import { WorkflowTasks } from './engine/workflow-tasks';
import { WorkflowUpdates } from './engine/updates';
import { Scheduler } from './schedules/scheduler';
import { startWebUi, type WebUiOptions } from './http';
import type { UiServer } from './http/ui-server';
import { PostgresStore } from './persistence/postgres-store';
import type { Store } from './persistence/store';
import { type ConnectionRefusal, listenGrpc } from './rpc/grpc-listener';
import { addService } from './rpc/grpc-server';
import { healthHandlers, operatorServiceHandlers, testServiceHandlers } from './rpc/operator-and-test-services';
import { workflowServiceHandlers } from './rpc/workflow-service';

// The package's public entry (its `exports` offer no other module): besides the server, the Host
// check of the Web UI's port and the protobuf root the server encodes with (the SDK's own).
export { hostAllowed, type UiServer } from './http/ui-server';
export type { WebUiOptions } from './http';
export type { ConnectionRefusal } from './rpc/grpc-listener';
export { root as protoRoot } from './proto';

export interface DevServerOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  persistence?: { kind: 'memory' } | { kind: 'postgres'; url: string; schema?: string };
  /**
   * Temporal test-server semantics: while skipping is unlocked and nothing is in flight, time jumps
   * to the next deadline. Starts locked (time runs normally) until a TestService client unlocks it,
   * as the test server does when @temporalio/testing launches it.
   */
  timeSkipping?: boolean;
  /** With `timeSkipping`, start unlocked (the test server's `--enable-time-skipping`). */
  timeSkippingStartsUnlocked?: boolean;
  log?: pino.Logger;
  /** Namespaces to create if missing; `default` always exists. */
  namespaces?: string[];
  /**
   * Closed runs kept in memory. In memory mode older ones are forgotten (like retention, but
   * sooner); in durable mode they stay in PostgreSQL. Default 5000 (memory) / 500 (durable).
   */
  maxClosedInMemory?: number;
  /**
   * Connections the gRPC port holds at once; more are closed as they arrive. Default 256: a worker
   * or a client keeps one connection.
   */
  maxConnections?: number;
  /** Connections the gRPC port holds at once from one client address. Default 64. */
  maxConnectionsPerClient?: number;
  /** A connection that has not sent the HTTP/2 preface this long after connecting is closed. Default 10 000. */
  prefaceTimeoutMs?: number;
  /**
   * Told of every connection closed at the limits (an embedding service counts and logs them); without
   * it the server logs a warning at most once a minute.
   */
  onConnectionRefused?: (reason: ConnectionRefusal, client: string) => void;
  /**
   * The Temporal Web UI with its `/api/v1` HTTP API on its own port (http/ui-server.ts). `app: false`
   * serves the API alone; otherwise the app is built on first use (http/webui-build.ts).
   */
  ui?: WebUiOptions;
}

export interface DevServer {
  /** host:port to give to `Connection.connect({ address })` / `NativeConnection.connect`. */
  address: string;
  port: number;
  /** The Web UI, when `ui` was asked for. */
  ui?: UiServer;
  stop(): Promise<void>;
}

const RETENTION_SWEEP_MS = 60_000;
const MAX_MESSAGE_BYTES = 128 * 1024 * 1024;
const DEFAULT_MAX_CONNECTIONS = 256;
const DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 64;
const DEFAULT_PREFACE_TIMEOUT_MS = 10_000;

export async function startDevServer(opts: DevServerOptions = {}): Promise<DevServer> {
  const host = opts.host ?? '127.0.0.1';
  const log = (opts.log ?? pino({ level: 'warn' })).child({ component: 'temporal-devserver' });
  const persistence = opts.persistence ?? { kind: 'memory' };
  const store: Store | undefined =
    persistence.kind === 'postgres' ? await PostgresStore.open(persistence.url, persistence.schema ?? 'temporal_dev', log) : undefined;

  try {
    const namespaces: NamespaceRecord[] = store ? await store.loadNamespaces() : [];
    for (const name of new Set(['default', ...(opts.namespaces ?? [])])) {
      if (namespaces.some((n) => n.name === name)) continue;
      const ns = newNamespace(name);
      namespaces.push(ns);
      await store?.saveNamespace(ns);
    }

    // The timer queue asks the engine what is in flight; the engine is created right after.
    // eslint-disable-next-line prefer-const -- read by the timer queue's callback before it is assigned
    let engine: Engine | undefined;
    const timers = new TimerQueue(!!opts.timeSkipping, () => engine?.inFlight() ?? 0, opts.timeSkippingStartsUnlocked ? 0 : 1);
    engine = new Engine({
      timers,
      store,
      log,
      namespaces,
      maxClosedInMemory: opts.maxClosedInMemory ?? (store ? 500 : 5000),
    });
    const activityTasks = new ActivityTasks(engine);
    const workflowTasks = new WorkflowTasks(engine, activityTasks);
    engine.dispatchTask = (exec, task) =>
      task.kind === 'workflow' ? workflowTasks.enqueue(exec, task.seq) : activityTasks.enqueue(exec, task.rec, task.attempt);
    const resumed = await engine.resumeFromStore();
    if (resumed) log.info({ runs: resumed }, 'resumed open workflow runs from PostgreSQL');

    const saveNamespace = async (ns: NamespaceRecord) => {
      await store?.saveNamespace(ns);
    };
    const server = new grpc.Server({
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      // Channelz bookkeeping costs on every call and nobody reads it here.
      'grpc.enable_channelz': 0,
    });
    const ops = new WorkflowOperations(engine);
    const scheduler = new Scheduler(engine, ops);
    const visibility = new VisibilityService(engine);
    visibility.scheduleRows = (namespace) => scheduler.visibilityRows(namespace);
    const schedules = await scheduler.load();
    if (schedules) log.info({ schedules }, 'resumed schedules from PostgreSQL');
    const workflowService = {
      name: 'temporal.api.workflowservice.v1.WorkflowService',
      handlers: workflowServiceHandlers({
        engine,
        ops,
        updates: new WorkflowUpdates(engine, ops),
        scheduler,
        workflowTasks,
        activityTasks,
        history: new HistoryReader(engine),
        visibility,
        saveNamespace,
      }),
    };
    const operatorService = { name: 'temporal.api.operatorservice.v1.OperatorService', handlers: operatorServiceHandlers(engine, saveNamespace) };
    for (const svc of [workflowService, operatorService]) addService(server, svc.name, svc.handlers, log);
    addService(server, 'grpc.health.v1.Health', healthHandlers(), log);
    if (opts.timeSkipping) addService(server, 'temporal.api.testservice.v1.TestService', testServiceHandlers(timers), log);

    // Our own listener hands grpc-js the connections it admits (rpc/grpc-listener.ts).
    const listener = await listenGrpc({
      host,
      port: opts.port ?? 0,
      limits: {
        max: opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
        perClient: opts.maxConnectionsPerClient ?? DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        prefaceTimeoutMs: opts.prefaceTimeoutMs ?? DEFAULT_PREFACE_TIMEOUT_MS,
      },
      injector: server.createConnectionInjector(grpc.ServerCredentials.createInsecure()),
      log,
      onRefused: opts.onConnectionRefused,
    });
    const port = listener.port;

    const sweep = setInterval(() => {
      engine!.enforceRetention().catch((err) => log.warn({ err }, 'retention sweep failed'));
    }, RETENTION_SWEEP_MS);
    sweep.unref();

    const webUi = opts.ui ? await startWebUi(opts.ui, [workflowService, operatorService], log) : undefined;

    const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
    log.info({ address, durable: !!store, timeSkipping: !!opts.timeSkipping }, 'Temporal dev server listening');
    let stopped: Promise<void> | undefined;
    return {
      address,
      port,
      ui: webUi?.server,
      stop: () =>
        (stopped ??= (async () => {
          clearInterval(sweep);
          await webUi?.stop();
          scheduler.stop();
          engine!.stop();
          timers.stop();
          listener.close();
          await new Promise<void>((resolve) => {
            const force = setTimeout(() => {
              server.forceShutdown();
              // Without channelz grpc-js does not track the sessions it would end here.
              listener.destroyAll();
              resolve();
            }, 2000);
            server.tryShutdown(() => {
              clearTimeout(force);
              resolve();
            });
          });
          await store?.close();
        })()),
    };
  } catch (err) {
    await store?.close();
    throw err;
  }
}
