import { Client, Connection, type WorkflowClientInterceptor } from '@temporalio/client';
import type { Logger } from 'pino';
import { temporal } from '@temporalio/proto';
import type { Metrics } from '../src/metrics';
import type { WorkflowStarter } from '../src/modules/workflow-starter';
import { workflowStarter } from './starts';
import { searchAttributes } from './workflow-ids';

/** The connection, and the typed starts every module asks for (the WorkflowStarter port, from ./starts). */
export interface TemporalClient extends WorkflowStarter {
  client: Client;
  connection: Connection;
  namespace: string;
  taskQueue: string;
  address: string;
  /** Resolves when the frontend answers; the health check. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Every start of the service goes through here, whichever module asks for it. */
function countStarts(metrics: Metrics): WorkflowClientInterceptor {
  const counted = async <T>(workflowType: string, start: () => Promise<T>): Promise<T> => {
    metrics.workflowStarts.inc({ workflow_type: workflowType });
    try {
      return await start();
    } catch (err) {
      metrics.workflowStartFailures.inc({ workflow_type: workflowType, error: (err as Error)?.name ?? 'Error' });
      throw err;
    }
  };
  return {
    startWithDetails: (input, next) => counted(input.workflowType, () => next(input)),
    signalWithStart: (input, next) => counted(input.workflowType, () => next(input)),
  };
}

/** The one place that connects to Temporal: the built-in dev server or TEMPORAL_ADDRESS. */
export async function connectTemporal(opts: { address: string; namespace: string; taskQueue: string; metrics?: Metrics }): Promise<TemporalClient> {
  const connection = await Connection.connect({ address: opts.address });
  const client = new Client({ connection, namespace: opts.namespace, interceptors: { workflow: opts.metrics ? [countStarts(opts.metrics)] : [] } });
  return {
    ...workflowStarter(client, opts.taskQueue),
    client,
    connection,
    namespace: opts.namespace,
    taskQueue: opts.taskQueue,
    address: opts.address,
    ping: async () => {
      await connection.withDeadline(Date.now() + 2500, () => connection.workflowService.getSystemInfo({}));
    },
    close: () => connection.close(),
  };
}

/**
 * Registers the keyword search attributes the service sets on its executions, if missing. On a real
 * cluster this needs operator rights; when refused, the problem is logged and the operator registers
 * them by hand (docs/operations.md).
 */
export async function ensureSearchAttributes(t: TemporalClient, log: Logger): Promise<void> {
  const ops = t.connection.operatorService;
  try {
    const existing = await ops.listSearchAttributes({ namespace: t.namespace });
    const known = new Set([...Object.keys(existing.customAttributes ?? {}), ...Object.keys(existing.systemAttributes ?? {})]);
    const missing = Object.keys(searchAttributes).filter((name) => !known.has(name));
    if (missing.length === 0) return;
    await ops.addSearchAttributes({
      namespace: t.namespace,
      searchAttributes: Object.fromEntries(missing.map((name) => [name, temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD])),
    });
    log.info({ searchAttributes: missing }, 'registered Temporal search attributes');
  } catch (err) {
    log.warn({ err }, 'could not register Temporal search attributes; register them by hand (docs/operations.md)');
  }
}
