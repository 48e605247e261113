import fs from 'node:fs';
import path from 'node:path';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import { type ActivityInterceptorsFactory, type InjectedSinks, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { Metrics } from '../src/metrics';
import { type ActivityDeps, campaignChunkActivities, createActivities, ownActivities } from './activities';
import { campaignChunkQueue } from './workflow-ids';
import type { MetricsSinks } from './workflows/interceptors';

// This file runs as dist/temporal/worker.js, or as temporal/worker.ts under jest.
const ROOT = path.resolve(__dirname, __filename.endsWith('.ts') ? '..' : '../..');

/** Built by `npm run build` (scripts/bundle-workflows.ts), so workers never bundle at start-up. */
export const WORKFLOW_BUNDLE = path.join(ROOT, 'dist', 'workflow-bundle.js');
/** Bundled with the workflows; reports how runs end to the `metrics` sink below. */
export const WORKFLOW_INTERCEPTORS = require.resolve('./workflows/interceptors');

export interface RunningWorker {
  /** How the worker names itself to Temporal in its polls. */
  identity: string;
  /**
   * This process's own task queue: work that must run here (its email dispatchers' drains, which take
   * mail handed over in memory by this process) is scheduled on it; nothing else polls it.
   */
  ownQueue: string;
  /** The SDK worker's state: RUNNING while it polls. */
  state(): string;
  stop(): Promise<void>;
}

export interface WorkerOptions extends ActivityDeps {
  address: string;
  namespace: string;
  taskQueue: string;
  /** This process's own task queue (RunningWorker.ownQueue). */
  ownQueue: string;
  /** CAMPAIGN_CHUNKS_PER_WORKER: campaign chunks this worker delivers at once. */
  campaignChunksPerWorker: number;
  log: Logger;
  metrics: Metrics;
  /** SHUTDOWN_TIMEOUT_SECONDS: how long stop() lets running activities finish before the worker gives up on them. */
  shutdownTimeoutSeconds: number;
  /** TEMPORAL_MAX_CACHED_WORKFLOWS: bounds the worker's memory whatever the number of waiting executions. */
  maxCachedWorkflows: number;
  /** Overrides the prebuilt bundle (tests that change workflow code without a build). */
  workflowsPath?: string;
}

const LEVELS: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The SDK's logs (its own and its native core's) go to our JSON log. Signal handling stays ours, so
 * shutdown runs in the service's order rather than the SDK's.
 */
function installRuntime(log: Logger): void {
  if (Runtime._instance) return;
  const sdk = log.child({ component: 'temporal-sdk' });
  // The activity-only workers (a process's own queue, campaign chunks) poll no workflows, and say so at start.
  const quiet = (message: string) => message === 'No workflows registered, not polling for workflow tasks';
  const emit = (level: LogLevel, message: string, meta?: LogMetadata) => sdk[quiet(message) ? 'debug' : LEVELS[level]](meta ?? {}, message);
  Runtime.install({
    shutdownSignals: [],
    logger: {
      log: emit,
      trace: (m, meta) => emit('TRACE', m, meta),
      debug: (m, meta) => emit('DEBUG', m, meta),
      info: (m, meta) => emit('INFO', m, meta),
      warn: (m, meta) => emit('WARN', m, meta),
      error: (m, meta) => emit('ERROR', m, meta),
    },
    telemetryOptions: { logging: { filter: { core: 'WARN', other: 'ERROR' }, forward: {} } },
  });
}

/** Times every activity attempt and counts its failures by activity type (cancellations are not failures). */
function activityMetrics(metrics: Metrics): ActivityInterceptorsFactory {
  return (ctx) => ({
    inbound: {
      async execute(input, next) {
        const labels = { activity_type: ctx.info.activityType };
        const end = metrics.activityDuration.startTimer(labels);
        try {
          return await next(input);
        } catch (err) {
          if (!ctx.cancellationSignal.aborted) metrics.activityFailures.inc(labels);
          throw err;
        } finally {
          end();
        }
      },
    },
  });
}

/** Runs the service's workflows and activities on one task queue until stopped. */
export async function startWorker(opts: WorkerOptions): Promise<RunningWorker> {
  installRuntime(opts.log);
  const connection = await NativeConnection.connect({ address: opts.address });
  const bundle = !opts.workflowsPath && fs.existsSync(WORKFLOW_BUNDLE) ? { codePath: WORKFLOW_BUNDLE } : undefined;
  if (!bundle && !opts.workflowsPath) {
    throw new Error(`workflow bundle missing at ${WORKFLOW_BUNDLE}: run \`npm run build\``);
  }
  const worker = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    activities: createActivities(opts),
    maxCachedWorkflows: opts.maxCachedWorkflows,
    interceptors: {
      activity: [activityMetrics(opts.metrics)],
      // With a prebuilt bundle the workflow interceptors are already inside it.
      ...(bundle ? {} : { workflowModules: [WORKFLOW_INTERCEPTORS] }),
    },
    sinks: {
      metrics: {
        runEnded: { fn: (info, outcome) => opts.metrics.workflowOutcomes.inc({ workflow_type: info.workflowType, outcome }) },
      },
    } satisfies InjectedSinks<MetricsSinks>,
    // Activities are asked to stop at once (the drains finish and record the sends in flight); after
    // this long, the worker stops waiting for those that do not.
    shutdownForceTime: `${opts.shutdownTimeoutSeconds}s`,
    // The SDK refuses more concurrent workflow tasks than cached workflows (unless the cache is off).
    ...(opts.maxCachedWorkflows > 0 && opts.maxCachedWorkflows < 40 ? { maxConcurrentWorkflowTaskExecutions: Math.max(2, opts.maxCachedWorkflows) } : {}),
    ...(bundle ? { workflowBundle: bundle } : { workflowsPath: opts.workflowsPath }),
  });
  // The drains of this process's own email dispatchers: every worker delivers its share of the queue.
  const ownQueue = opts.ownQueue;
  const own = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: ownQueue,
    activities: ownActivities(opts),
    interceptors: { activity: [activityMetrics(opts.metrics)] },
    shutdownForceTime: `${opts.shutdownTimeoutSeconds}s`,
  });
  // Campaign chunks on a queue of their own, at most CAMPAIGN_CHUNKS_PER_WORKER at once here: what this
  // worker cannot take goes to the others, so every worker in the pool takes its part of a campaign.
  const chunks = await Worker.create({
    connection,
    namespace: opts.namespace,
    taskQueue: campaignChunkQueue(opts.taskQueue),
    activities: campaignChunkActivities(opts),
    maxConcurrentActivityTaskExecutions: opts.campaignChunksPerWorker,
    interceptors: { activity: [activityMetrics(opts.metrics)] },
    shutdownForceTime: `${opts.shutdownTimeoutSeconds}s`,
  });
  const running = Promise.all([worker.run(), own.run(), chunks.run()]).catch((err) => {
    opts.log.error({ err }, 'Temporal worker stopped with an error');
  });
  opts.log.info({ taskQueue: opts.taskQueue, ownQueue, namespace: opts.namespace }, 'Temporal worker running');
  return {
    identity: worker.options.identity,
    ownQueue,
    state: () => worker.getState(),
    stop: async () => {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      if (own.getState() === 'RUNNING') own.shutdown();
      if (chunks.getState() === 'RUNNING') chunks.shutdown();
      await running;
      await connection.close();
    },
  };
}
