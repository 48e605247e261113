/**
 * What every standing dispatcher (email, automation, webhook) does through dispatch-loop.ts, tested
 * once per dispatcher: drain; then sleep until woken, until the next item comes due (or, for a
 * dispatcher with a longest sleep, that long); continue as new after DRAINS_PER_RUN drains.
 */
import type { WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { wakeSignal } from '../../temporal/workflows/dispatch-loop';
import { eventually, type MockActivities, type QueueActivities, runsOf, scheduledAt, withWorkers } from './env';

export interface DrainResult {
  idle: boolean;
  nextDueInSeconds: number | null;
}

export type Drain = () => Promise<DrainResult>;

export interface DispatcherSpec<A extends [unknown]> {
  workflow: (...args: A) => Promise<void>;
  args: (taskQueue: string) => A;
  workflowId: (taskQueue: string) => string;
  /** The workers: their mocked activities, with `drain` answering the dispatcher's drain activity. */
  workers: (drain: Drain) => { activities: MockActivities; more?: (taskQueue: string) => QueueActivities[] };
  /** How long it sleeps at most with nothing due (undefined: until woken). */
  maxSleepMs?: number;
}

/** DRAINS_PER_RUN in dispatch-loop.ts. */
const DRAINS_PER_RUN = 200;
const MINUTE = 60_000;

/** Runs one dispatcher with its drains answered by `drain` (called in the activity, with the dispatcher's workflow id). */
export async function runDispatcher<A extends [unknown]>(
  env: TestWorkflowEnvironment,
  spec: DispatcherSpec<A>,
  drain: (workflowId: string) => Promise<DrainResult>,
  fn: (ctx: { taskQueue: string; handle: WorkflowHandleWithFirstExecutionRunId }) => Promise<void>,
): Promise<void> {
  let workflowId = '';
  const { activities, more } = spec.workers(() => drain(workflowId));
  await withWorkers(
    env,
    activities,
    async (taskQueue) => {
      workflowId = spec.workflowId(taskQueue);
      const handle = await env.client.workflow.start(spec.workflow as (...args: [unknown]) => Promise<void>, {
        taskQueue,
        workflowId,
        args: spec.args(taskQueue),
      });
      await fn({ taskQueue, handle });
    },
    more,
  );
}

/** The dispatch-loop tests, for one dispatcher; `state.env` is the file's environment. */
export function dispatchLoopTests<A extends [unknown]>(state: { env: TestWorkflowEnvironment }, spec: DispatcherSpec<A>): void {
  test('drains at once, then sleeps on a durable timer until the next item comes due, then drains again', async () => {
    const drains: number[] = [];
    const drain = async () => {
      drains.push(scheduledAt());
      return { idle: true, nextDueInSeconds: 600 };
    };
    await runDispatcher(state.env, spec, drain, async () => {
      await eventually(() => drains.length === 1, 'the first drain');
      await state.env.sleep(9 * MINUTE);
      expect(drains).toHaveLength(1);
      await state.env.sleep(2 * MINUTE);
      await eventually(() => drains.length === 2, 'the drain when the next item is due');
      expect(drains[1] - drains[0]).toBeGreaterThanOrEqual(10 * MINUTE);
      expect(drains[1] - drains[0]).toBeLessThan(11 * MINUTE);
    });
  });

  test('with nothing due, the wake signal ends its sleep at once', async () => {
    let calls = 0;
    const drain = async () => {
      calls++;
      return { idle: true, nextDueInSeconds: null };
    };
    await runDispatcher(state.env, spec, drain, async ({ handle }) => {
      const history = async () => (await handle.fetchHistory()).events ?? [];
      // Asleep: the workflow task that followed the first drain has completed.
      await eventually(async () => {
        const events = await history();
        const drained = events.findIndex((e) => e.activityTaskCompletedEventAttributes);
        return drained >= 0 && events.slice(drained).some((e) => e.workflowTaskCompletedEventAttributes);
      }, 'the dispatcher asleep after its first drain');
      expect(calls).toBe(1);
      // Time stands still here (nothing awaits a result), so only the signal can bring the next drain.
      await handle.signal(wakeSignal);
      await eventually(() => calls === 2, 'the drain after the wake signal');
      expect((await history()).some((e) => e.timerFiredEventAttributes)).toBe(false);
    });
  });

  test('a wake signal that arrives during a drain is not lost: it drains again without sleeping', async () => {
    let calls = 0;
    const drain = async (workflowId: string) => {
      // Work queued while this drain was finishing: the worker rings the bell.
      if (++calls === 1) await state.env.client.workflow.getHandle(workflowId).signal(wakeSignal);
      return { idle: true, nextDueInSeconds: null };
    };
    await runDispatcher(state.env, spec, drain, async ({ handle }) => {
      await eventually(() => calls === 2, 'the second drain');
      const events = (await handle.fetchHistory()).events ?? [];
      expect(events.some((e) => e.timerFiredEventAttributes)).toBe(false);
    });
  });

  test('busy, or with work due now, it drains again without sleeping', async () => {
    const answers: DrainResult[] = [
      { idle: false, nextDueInSeconds: null },
      { idle: true, nextDueInSeconds: 0 },
      { idle: true, nextDueInSeconds: null },
    ];
    let calls = 0;
    const drain = async () => answers[Math.min(calls++, answers.length - 1)];
    await runDispatcher(state.env, spec, drain, async ({ handle }) => {
      await eventually(() => calls === 3, 'three drains');
      const events = (await handle.fetchHistory()).events ?? [];
      const third = events.filter((e) => e.activityTaskScheduledEventAttributes)[2];
      expect(events.slice(0, events.indexOf(third)).some((e) => e.timerStartedEventAttributes)).toBe(false);
    });
  });

  test(`continues as new after ${DRAINS_PER_RUN} drains, so its history stays bounded`, async () => {
    let calls = 0;
    const drain = async () => {
      calls++;
      return { idle: false, nextDueInSeconds: null };
    };
    await runDispatcher(state.env, spec, drain, async ({ handle, taskQueue }) => {
      await eventually(() => calls > DRAINS_PER_RUN + 1, 'drains past the first run', 60_000);
      const runs = await runsOf(handle);
      expect(runs.length).toBeGreaterThanOrEqual(2);
      const first = runs[0].events;
      expect(first.filter((e) => e.activityTaskScheduledEventAttributes)).toHaveLength(DRAINS_PER_RUN);
      const continued = first.at(-1)?.workflowExecutionContinuedAsNewEventAttributes;
      expect(continued).toBeTruthy();
      // The next run is the same dispatcher: same input, same task queue.
      const started = runs[1].events[0].workflowExecutionStartedEventAttributes!;
      expect(started.taskQueue?.name).toBe(taskQueue);
      const decode = (p: { data?: Uint8Array | null } | undefined) => JSON.parse(Buffer.from(p!.data!).toString());
      expect(decode(started.input?.payloads?.[0])).toEqual(spec.args(taskQueue)[0]);
    });
  });

  if (spec.maxSleepMs !== undefined) {
    const maxSleepMs = spec.maxSleepMs;
    test(`with nothing due it still looks again after ${maxSleepMs / 3_600_000} h, and a due time past that wakes it no later`, async () => {
      const drains: number[] = [];
      const answers = [null, 10 * maxSleepMs, null];
      const drain = async () => {
        drains.push(scheduledAt());
        const due = answers[Math.min(drains.length - 1, answers.length - 1)];
        return { idle: true, nextDueInSeconds: due === null ? null : due / 1000 };
      };
      await runDispatcher(state.env, spec, drain, async () => {
        await eventually(() => drains.length === 1, 'the first drain');
        await state.env.sleep(maxSleepMs + MINUTE);
        await eventually(() => drains.length === 2, 'the second look');
        await state.env.sleep(maxSleepMs);
        await eventually(() => drains.length === 3, 'the third look');
        for (const gap of [drains[1] - drains[0], drains[2] - drains[1]]) {
          expect(gap).toBeGreaterThanOrEqual(maxSleepMs);
          expect(gap).toBeLessThan(maxSleepMs + MINUTE);
        }
      });
    });
  }
}
