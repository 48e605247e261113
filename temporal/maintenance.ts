import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { TemporalClient } from './client';
import { workflowIds } from './task-queues';

export interface DispatcherCounts {
  emailDispatchers: number;
  automationDispatchers: number;
}

type Dispatcher = 'email' | 'automation';

const dispatchers = (kind: Dispatcher, counts: DispatcherCounts) =>
  kind === 'email'
    ? Array.from({ length: counts.emailDispatchers }, (_, shard) => ({ type: 'emailDispatchWorkflow', id: workflowIds.emailDispatch(shard), shard }))
    : Array.from({ length: counts.automationDispatchers }, (_, shard) => ({ type: 'automationDispatchWorkflow', id: workflowIds.automationDispatch(shard), shard }));

/** Starts a dispatcher that does not run, and wakes it either way (signal-with-start). */
async function wakeOrStart(t: TemporalClient, d: { type: string; id: string; shard: number }): Promise<void> {
  await t.client.workflow.signalWithStart(d.type, { workflowId: d.id, taskQueue: t.taskQueue, args: [{ shard: d.shard }], signal: 'wake', signalArgs: [] });
}

/**
 * The service's standing executions: `maintenance`, `activity-counts` and the email and automation dispatchers. Every
 * worker process calls this at start; executions that already run are left as they are, except that
 * sleeping dispatchers are woken to look at what was queued while no worker ran.
 */
export async function ensureStandingWorkflows(t: TemporalClient, counts: DispatcherCounts): Promise<void> {
  for (const [type, workflowId] of [
    ['maintenanceWorkflow', workflowIds.maintenance()],
    ['activityCountsWorkflow', workflowIds.activityCounts()],
  ]) {
    try {
      await t.client.workflow.start(type, { workflowId, taskQueue: t.taskQueue, workflowIdConflictPolicy: 'USE_EXISTING' });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
  }
  for (const kind of ['email', 'automation'] as const) for (const d of dispatchers(kind, counts)) await wakeOrStart(t, d);
}

/**
 * Wakes one kind of dispatcher when work was queued and no drain of this process was running: at
 * once for the first notification, then at most once per `intervalMs` while notifications keep coming.
 */
export function dispatcherWaker(
  t: TemporalClient,
  kind: Dispatcher,
  counts: DispatcherCounts,
  onError: (err: unknown) => void,
  intervalMs = 200,
): { notify: () => void; stop: () => void } {
  let last = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const wake = () => {
    timer = undefined;
    last = Date.now();
    if (!stopped) for (const d of dispatchers(kind, counts)) wakeOrStart(t, d).catch(onError);
  };
  return {
    notify: () => {
      if (timer || stopped) return;
      const wait = last + intervalMs - Date.now();
      if (wait <= 0) wake();
      else timer = setTimeout(wake, wait);
    },
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
