import {
  ApplicationFailure,
  CancellationScope,
  condition,
  ContinueAsNew,
  continueAsNew,
  defineSignal,
  isCancellation,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';

export interface AutomationEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
}

/** A recorded event the execution may be waiting for (sent by the automation dispatcher). */
export const automationEventSignal = defineSignal<[AutomationEvent]>('automationEvent');

// Short database steps run as local activities: no round trip through the server per step.
const local = proxyLocalActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '30 seconds' },
});

// A webhook gets 10 s per attempt and a few attempts with backoff; refusals (private addresses, 4xx) are final.
const { automationWebhook } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '2 seconds', backoffCoefficient: 2, maximumAttempts: 4, nonRetryableErrorTypes: ['WebhookRefused'] },
});

const UNIT_MS = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 } as const;
/** Steps per run before continuing as new, so the history of a long-lived execution stays bounded. */
const STEPS_PER_RUN = 100;

/** How a wait ended; recorded by the activity that follows it (see WaitEnd in the runtime). */
interface WaitEnd {
  seq: number;
  outcome: 'event' | 'timeout' | 'elapsed';
  event?: AutomationEvent;
}

export interface AutomationInput {
  executionId: string;
  resume?: { stepId: string; seq: number; closed?: WaitEnd };
}

/**
 * `automation:<executionId>`: walks the definition snapshotted when the execution started. DELAY is
 * a durable timer; WAIT_FOR_EVENT registers the wait (found by project, contact and event name when
 * an event is recorded) and takes its `event` or `timeout` transition; every other step is one
 * idempotent activity, which also records the end of the wait before it and, for the last step, the
 * end of the execution, so that a wake-up costs one activity. The execution's status in the
 * database follows each move.
 */
export async function automationWorkflow(input: AutomationInput): Promise<void> {
  const inbox: AutomationEvent[] = [];
  const seen = new Set<string>();
  setHandler(automationEventSignal, (e) => {
    if (seen.has(e.id)) return;
    seen.add(e.id);
    inbox.push(e);
  });
  const { executionId } = input;
  try {
    const loaded = await local.automationLoad({ executionId, recordTrigger: !input.resume });
    if (!loaded || (loaded.status !== 'RUNNING' && loaded.status !== 'WAITING')) return;
    const def = loaded.definition;
    const follow = (from: string, match: { branch?: 'yes' | 'no'; outcome?: 'event' | 'timeout' }) =>
      def.transitions.find(
        (t) => t.fromStepId === from && (match.branch ? t.branch === match.branch : true) && (match.outcome ? t.outcome === match.outcome : true),
      )?.toStepId;
    const trigger = def.steps.find((s) => s.type === 'TRIGGER');
    let stepId: string | undefined = input.resume ? input.resume.stepId : trigger && follow(trigger.id, {});
    let seq = input.resume?.seq ?? 1;
    let closed = input.resume?.closed;
    for (let steps = 0; stepId; steps++) {
      if (steps >= STEPS_PER_RUN || workflowInfo().historyLength > 5000) {
        await continueAsNew<typeof automationWorkflow>({ executionId, resume: { stepId, seq, closed } });
      }
      const step = def.steps.find((s) => s.id === stepId);
      if (!step) throw ApplicationFailure.nonRetryable(`step ${stepId} is not in the definition`);
      seq++;
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each step type reads its own fields, validated when saved
      const config = step.config as Record<string, any>;
      let next: string | undefined;
      if (step.type === 'DELAY') {
        await local.automationBeginWait({ executionId, stepId: step.id, seq, closed });
        await sleep(Number(config.amount) * UNIT_MS[config.unit as keyof typeof UNIT_MS]);
        closed = { seq, outcome: 'elapsed' };
        next = follow(step.id, {});
      } else if (step.type === 'WAIT_FOR_EVENT') {
        const name = String(config.eventName);
        inbox.length = 0;
        await local.automationBeginWait({ executionId, stepId: step.id, seq, eventName: name, closed });
        const arrivedNow = () => inbox.some((e) => e.name === name);
        const arrived = config.timeout ? await condition(arrivedNow, Number(config.timeout) * 1000) : (await condition(arrivedNow), true);
        const event = arrived
          ? inbox.splice(
              inbox.findIndex((e) => e.name === name),
              1,
            )[0]
          : undefined;
        closed = { seq, outcome: event ? 'event' : 'timeout', event };
        next = follow(step.id, { outcome: event ? 'event' : 'timeout' });
      } else if (step.type === 'WEBHOOK') {
        await automationWebhook({ executionId, stepId: step.id, seq, closed });
        closed = undefined;
        next = follow(step.id, {});
      } else {
        // Whether a step follows is known before a step without branches runs: if none, it records the end too.
        const last = step.type !== 'CONDITION' && step.type !== 'EXIT' && !follow(step.id, {});
        const outcome = await local.automationRunStep({ executionId, stepId: step.id, seq, closed, last });
        closed = undefined;
        if (outcome === 'exit' || last) return;
        next = follow(step.id, outcome === 'yes' || outcome === 'no' ? { branch: outcome } : {});
      }
      stepId = next;
    }
    await local.automationFinish({ executionId, status: 'COMPLETED', closed });
  } catch (err) {
    // Continuing as new (every STEPS_PER_RUN steps) is how a long execution goes on, not how it fails.
    if (err instanceof ContinueAsNew) throw err;
    if (isCancellation(err)) {
      await CancellationScope.nonCancellable(() => local.automationFinish({ executionId, status: 'CANCELLED' }));
      throw err;
    }
    const message = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    await local.automationFinish({ executionId, status: 'FAILED', error: message });
    throw ApplicationFailure.nonRetryable(message, 'AutomationFailed');
  }
}
