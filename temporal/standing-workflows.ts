import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Workflow } from '@temporalio/client';
import type { TemporalClient } from './client';
import { workflowIds } from './workflow-ids';
import { activityCountsFoldWorkflow } from './workflows/activity-counts.workflow';
import { automationDispatchWorkflow } from './workflows/automation-dispatch.workflow';
import { wakeSignal } from './workflows/dispatch-loop';
import { emailDispatchWorkflow } from './workflows/email-dispatch.workflow';
import { maintenancePurgeWorkflow } from './workflows/maintenance.workflow';
import { webhookDispatchWorkflow } from './workflows/webhook-dispatch.workflow';

export interface DispatcherCounts {
  /** Per worker process: each runs its own, on its own task queue. */
  emailDispatchers: number;
  automationDispatchers: number;
  webhookDispatchers: number;
}

type Dispatcher = 'email' | 'automation' | 'webhook';

interface StandingDispatcher<W extends Workflow = Workflow> {
  workflow: W;
  id: string;
  args: Parameters<W>;
}

/** A dispatcher's start, type-checked against its workflow function here, where it is made. */
const standing = <W extends Workflow>(workflow: W, id: string, args: Parameters<W>): StandingDispatcher => ({ workflow, id, args });

/**
 * The dispatchers of one kind this process looks after: the email ones of its own worker (`ownQueue`),
 * the automation and webhook ones shared by the pool.
 */
function dispatchers(kind: Dispatcher, counts: DispatcherCounts, ownQueue: string): StandingDispatcher[] {
  const shards = (n: number) => Array.from({ length: n }, (_, shard) => shard);
  if (kind === 'email') {
    return shards(counts.emailDispatchers).map((shard) =>
      standing(emailDispatchWorkflow, workflowIds.emailDispatch(ownQueue, shard), [{ shard, queue: ownQueue }]),
    );
  }
  const d =
    kind === 'automation'
      ? { workflow: automationDispatchWorkflow, id: workflowIds.automationDispatch, n: counts.automationDispatchers }
      : { workflow: webhookDispatchWorkflow, id: workflowIds.webhookDispatch, n: counts.webhookDispatchers };
  return shards(d.n).map((shard) => standing(d.workflow, d.id(shard), [{ shard }]));
}

/** Starts a dispatcher that does not run, and wakes it either way (signal-with-start). */
async function wakeOrStart(t: TemporalClient, d: StandingDispatcher): Promise<void> {
  await t.client.workflow.signalWithStart(d.workflow, { workflowId: d.id, taskQueue: t.taskQueue, args: d.args, signal: wakeSignal, signalArgs: [] });
}

/**
 * The email dispatchers of a worker that stops: cancelled, and waited for (a while) while the worker can
 * still run their last task, so they end now, their drains having given their claims back, rather
 * than leave a drain waiting on a queue no one polls.
 */
export async function stopOwnDispatchers(t: TemporalClient, counts: DispatcherCounts, ownQueue: string, waitMs = 10_000): Promise<void> {
  await Promise.all(
    dispatchers('email', counts, ownQueue).map(async (d) => {
      const handle = t.client.workflow.getHandle(d.id);
      await handle.cancel().catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([handle.result().catch(() => undefined), new Promise((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
    }),
  );
}

/** Periodic work with a fixed interval: a Temporal Schedule, one short workflow run per time. */
interface PeriodicWork {
  scheduleId: string;
  workflow: typeof maintenancePurgeWorkflow | typeof activityCountsFoldWorkflow;
  everyMs: number;
}

const periodicWork = (settings: { activityFoldSeconds: number }): PeriodicWork[] => [
  { scheduleId: workflowIds.maintenance(), workflow: maintenancePurgeWorkflow, everyMs: 10 * 60_000 },
  { scheduleId: workflowIds.activityCounts(), workflow: activityCountsFoldWorkflow, everyMs: settings.activityFoldSeconds * 1000 },
];

/**
 * Creates the schedule (acting once at once), or brings an existing one's interval, workflow and task
 * queue in line with this process's settings. A time missed while nothing ran is made up once at
 * most (overlap SKIP, one-minute catch-up window).
 */
async function ensureSchedule(t: TemporalClient, w: PeriodicWork): Promise<void> {
  const spec = { intervals: [{ every: w.everyMs }] };
  const action = { type: 'startWorkflow' as const, workflowType: w.workflow, workflowId: w.scheduleId, taskQueue: t.taskQueue };
  const policies = { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: 60_000 };
  try {
    await t.client.schedule.create({ scheduleId: w.scheduleId, spec, action, policies, state: { triggerImmediately: true } });
    return;
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
  }
  const handle = t.client.schedule.getHandle(w.scheduleId);
  const current = await handle.describe();
  const same =
    current.spec.intervals?.length === 1 &&
    current.spec.intervals[0].every === w.everyMs &&
    current.action.type === 'startWorkflow' &&
    current.action.workflowType === w.workflow.name &&
    current.action.taskQueue === t.taskQueue;
  if (!same) await handle.update((prev) => ({ ...prev, spec, action, policies: { ...prev.policies, ...policies } }));
}

/**
 * The service's standing work: the `maintenance` and `activity-counts` schedules, this worker's own
 * email dispatchers and the shared automation and webhook dispatchers. Every worker process calls this
 * at start; what already exists is left as it is (schedules are brought in line with the settings),
 * and sleeping dispatchers are woken to look at what was queued while no worker ran.
 */
export async function ensureStandingWorkflows(
  t: TemporalClient,
  counts: DispatcherCounts,
  settings: { activityFoldSeconds: number },
  ownQueue: string,
): Promise<void> {
  for (const w of periodicWork(settings)) {
    await ensureSchedule(t, w);
  }
  for (const kind of ['email', 'automation', 'webhook'] as const) for (const d of dispatchers(kind, counts, ownQueue)) await wakeOrStart(t, d);
}

/**
 * Wakes one kind of dispatcher when work was queued and no drain of this process was running: at
 * once for the first notification, then at most once per `intervalMs` while notifications keep coming.
 */
export function dispatcherWaker(
  t: TemporalClient,
  kind: Dispatcher,
  counts: DispatcherCounts,
  ownQueue: string,
  onError: (err: unknown) => void,
  intervalMs = 200,
): { notify: () => void; stop: () => void } {
  let last = 0;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const wake = () => {
    timer = undefined;
    last = Date.now();
    if (!stopped) for (const d of dispatchers(kind, counts, ownQueue)) wakeOrStart(t, d).catch(onError);
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
