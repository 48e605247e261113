import { Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { Definition } from '../../src/modules/automations/automations.service';
import type { StepType } from '../../src/modules/automations/automations.schemas';
import type { StepOutcome, WaitEnd } from '../../src/modules/automations/automation-runtime';
import { workflowIds } from '../../temporal/workflow-ids';
import { automationWorkflow } from '../../temporal/workflows';
import { type AutomationEvent, automationEventSignal } from '../../temporal/workflows/automation.workflow';
import { DAY, eventually, type MockActivities, runsOf, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

type Step = { id: string; type: StepType; config?: Record<string, unknown> };
type Edge = [from: string, to: string, via?: { branch?: 'yes' | 'no'; outcome?: 'event' | 'timeout' }];

function definition(steps: Step[], edges: Edge[]): Definition {
  return {
    workflowId: uid('automation'),
    name: 'test',
    steps: [{ id: 'trigger', type: 'TRIGGER', name: 'trigger', config: {} }, ...steps.map((s) => ({ name: s.id, config: {}, ...s }))],
    transitions: edges.map(([fromStepId, toStepId, via]) => ({ fromStepId, toStepId, branch: via?.branch ?? null, outcome: via?.outcome ?? null })),
  };
}

interface Call {
  call: string;
  /** The server's clock when the activity ran. */
  at: number;
  stepId?: string;
  seq?: number;
  closed?: WaitEnd;
  last?: boolean;
  eventName?: string;
  status?: string;
  error?: string;
  recordTrigger?: boolean;
}

/**
 * One execution as the runtime's activities see it: the definition loaded, each step's outcome
 * (`next` unless `outcomes` says otherwise), every call logged with the server time it ran at.
 */
class FakeExecution {
  readonly executionId = uid('execution');
  readonly workflowId = workflowIds.automation(this.executionId);
  readonly log: Call[] = [];
  status: 'RUNNING' | 'WAITING' | 'CANCELLED' | 'COMPLETED' = 'RUNNING';
  outcomes: Record<string, StepOutcome | ((seq: number) => StepOutcome)> = {};
  webhook: (attempt: number) => Promise<{ status: number }> = async () => ({ status: 200 });

  constructor(readonly def: Definition) {}

  calls(name: string): Call[] {
    return this.log.filter((c) => c.call === name);
  }

  /** Step ids in the order their activity ran (runStep, beginWait, webhook). */
  get path(): string[] {
    return this.log.filter((c) => c.stepId).map((c) => c.stepId!);
  }

  activities(): MockActivities {
    const now = () => t.env.currentTimeMs();
    return {
      automationLoad: async ({ recordTrigger }) => {
        this.log.push({ call: 'load', at: await now(), recordTrigger });
        return { status: this.status, definition: this.def };
      },
      automationRunStep: async ({ stepId, seq, closed, last }) => {
        this.log.push({ call: 'runStep', at: await now(), stepId, seq, closed, last });
        const outcome = this.outcomes[stepId] ?? 'next';
        return typeof outcome === 'function' ? outcome(seq) : outcome;
      },
      automationBeginWait: async ({ stepId, seq, eventName, closed }) => {
        this.log.push({ call: 'beginWait', at: await now(), stepId, seq, eventName, closed });
      },
      automationFinish: async ({ status, error, closed }) => {
        this.log.push({ call: 'finish', at: await now(), status, error, closed });
      },
      automationWebhook: async ({ stepId, seq, closed }) => {
        this.log.push({ call: 'webhook', at: await now(), stepId, seq, closed });
        return this.webhook(Context.current().info.attempt);
      },
    };
  }

  start(taskQueue: string) {
    return t.env.client.workflow.start(automationWorkflow, { taskQueue, workflowId: this.workflowId, args: [{ executionId: this.executionId }] });
  }

  /** Runs the execution to its end; answers its failure, if any. */
  async execute(): Promise<unknown> {
    return await withWorkers(t.env, this.activities(), async (taskQueue) => (await this.start(taskQueue)).result().catch((err: unknown) => err));
  }
}

describe('steps', () => {
  test('runs each step in order, numbering them; the last one records the end of the execution', async () => {
    const x = new FakeExecution(
      definition(
        [
          { id: 'mail', type: 'SEND_EMAIL' },
          { id: 'update', type: 'UPDATE_CONTACT' },
        ],
        [
          ['trigger', 'mail'],
          ['mail', 'update'],
        ],
      ),
    );
    expect(await x.execute()).toBeUndefined();
    expect(x.log.map(({ call, stepId, seq, last, recordTrigger }) => ({ call, stepId, seq, last, recordTrigger }))).toEqual([
      { call: 'load', recordTrigger: true },
      { call: 'runStep', stepId: 'mail', seq: 2, last: false },
      { call: 'runStep', stepId: 'update', seq: 3, last: true },
    ]);
  });

  test('a CONDITION takes the branch its step answers; an EXIT step ends it', async () => {
    const steps: Step[] = [
      { id: 'pro?', type: 'CONDITION' },
      { id: 'upsell', type: 'SEND_EMAIL' },
      { id: 'stop', type: 'EXIT' },
    ];
    const edges: Edge[] = [
      ['trigger', 'pro?'],
      ['pro?', 'upsell', { branch: 'yes' }],
      ['pro?', 'stop', { branch: 'no' }],
    ];
    const yes = new FakeExecution(definition(steps, edges));
    yes.outcomes['pro?'] = 'yes';
    await yes.execute();
    expect(yes.path).toEqual(['pro?', 'upsell']);
    const no = new FakeExecution(definition(steps, edges));
    no.outcomes = { 'pro?': 'no', stop: 'exit' };
    await no.execute();
    expect(no.path).toEqual(['pro?', 'stop']);
    // The EXIT step recorded the end itself.
    expect(no.calls('finish')).toEqual([]);
  });

  test('an execution that is no longer running when loaded (cancelled meanwhile) runs nothing', async () => {
    const x = new FakeExecution(definition([{ id: 'mail', type: 'SEND_EMAIL' }], [['trigger', 'mail']]));
    x.status = 'CANCELLED';
    expect(await x.execute()).toBeUndefined();
    expect(x.log.map((c) => c.call)).toEqual(['load']);
  });

  test('continues as new every 100 steps, carrying the step and its number on, without recording the trigger again', async () => {
    // A loop of two steps, left after 150 steps by an EXIT outcome.
    const x = new FakeExecution(
      definition(
        [
          { id: 'a', type: 'UPDATE_CONTACT' },
          { id: 'b', type: 'UPDATE_CONTACT' },
        ],
        [
          ['trigger', 'a'],
          ['a', 'b'],
          ['b', 'a'],
        ],
      ),
    );
    let steps = 0;
    x.outcomes = { a: () => (++steps === 150 ? 'exit' : 'next'), b: () => (++steps === 150 ? 'exit' : 'next') };
    const handle = await withWorkers(t.env, x.activities(), async (taskQueue) => {
      const h = await x.start(taskQueue);
      await h.result();
      return h;
    });
    expect((await runsOf(handle)).length).toBe(2);
    expect(x.calls('load').map((c) => c.recordTrigger)).toEqual([true, false]);
    expect(x.calls('runStep').map((c) => c.seq)).toEqual(Array.from({ length: 150 }, (_, i) => i + 2));
    expect(x.path.slice(99, 102)).toEqual(['b', 'a', 'b']);
    // Ended by the EXIT outcome, not failed by continuing as new.
    expect(x.calls('finish')).toEqual([]);
  });
});

describe('waits', () => {
  test('DELAY is a durable timer (3 days, skipped here); the next step records that the wait elapsed', async () => {
    const x = new FakeExecution(
      definition(
        [
          { id: 'wait', type: 'DELAY', config: { amount: 3, unit: 'days' } },
          { id: 'mail', type: 'SEND_EMAIL' },
        ],
        [
          ['trigger', 'wait'],
          ['wait', 'mail'],
        ],
      ),
    );
    const wallStart = Date.now();
    await x.execute();
    expect(Date.now() - wallStart).toBeLessThan(15_000);
    const [wait] = x.calls('beginWait');
    const [mail] = x.calls('runStep');
    expect(wait).toMatchObject({ stepId: 'wait', seq: 2 });
    expect(mail).toMatchObject({ stepId: 'mail', seq: 3, closed: { seq: 2, outcome: 'elapsed' }, last: true });
    expect(mail.at - wait.at).toBeGreaterThanOrEqual(3 * DAY);
    expect(mail.at - wait.at).toBeLessThan(3 * DAY + 60_000);
  });

  const waitForPurchase = (timeoutSeconds: number, withTimeoutEdge = true) =>
    definition(
      [
        { id: 'wait', type: 'WAIT_FOR_EVENT', config: { eventName: 'purchase', timeout: timeoutSeconds } },
        { id: 'thanks', type: 'SEND_EMAIL' },
        { id: 'nudge', type: 'SEND_EMAIL' },
      ],
      [['trigger', 'wait'], ['wait', 'thanks', { outcome: 'event' }], ...(withTimeoutEdge ? [['wait', 'nudge', { outcome: 'timeout' }] as Edge] : [])],
    );

  test('WAIT_FOR_EVENT: the automationEvent signal of its event wakes the wait, and the event goes on to the next step', async () => {
    const x = new FakeExecution(waitForPurchase(7 * 86_400));
    const purchase: AutomationEvent = { id: uid('event'), name: 'purchase', data: { amount: 42 } };
    await withWorkers(t.env, x.activities(), async (taskQueue) => {
      const handle = await x.start(taskQueue);
      await eventually(() => x.calls('beginWait').length === 1, 'the wait to begin');
      // Another event of the contact's does not end the wait.
      await handle.signal(automationEventSignal, { id: uid('event'), name: 'visit', data: {} });
      await handle.signal(automationEventSignal, purchase);
      await handle.result();
    });
    const [wait] = x.calls('beginWait');
    expect(wait).toMatchObject({ stepId: 'wait', seq: 2, eventName: 'purchase' });
    expect(x.path).toEqual(['wait', 'thanks']);
    const [thanks] = x.calls('runStep');
    expect(thanks.closed).toEqual({ seq: 2, outcome: 'event', event: purchase });
    // Woken by the event, not by the timeout.
    expect(thanks.at - wait.at).toBeLessThan(DAY);
  });

  test('WAIT_FOR_EVENT: with no event, the timeout (2 days, skipped) takes the "timeout" transition', async () => {
    const x = new FakeExecution(waitForPurchase(2 * 86_400));
    await x.execute();
    expect(x.path).toEqual(['wait', 'nudge']);
    const [wait] = x.calls('beginWait');
    const [nudge] = x.calls('runStep');
    expect(nudge.closed).toEqual({ seq: 2, outcome: 'timeout' });
    expect(nudge.at - wait.at).toBeGreaterThanOrEqual(2 * DAY);
  });

  test('WAIT_FOR_EVENT: a timeout with no "timeout" transition completes the execution, recording the timeout', async () => {
    const x = new FakeExecution(waitForPurchase(3600, false));
    await x.execute();
    expect(x.path).toEqual(['wait']);
    expect(x.calls('finish')).toEqual([expect.objectContaining({ status: 'COMPLETED', closed: { seq: 2, outcome: 'timeout' } })]);
  });

  test('an event signalled twice (the dispatcher handing it over again) is taken once: a second wait for it times out', async () => {
    const x = new FakeExecution(
      definition(
        [
          { id: 'first', type: 'WAIT_FOR_EVENT', config: { eventName: 'purchase', timeout: 86_400 } },
          { id: 'second', type: 'WAIT_FOR_EVENT', config: { eventName: 'purchase', timeout: 86_400 } },
        ],
        [
          ['trigger', 'first'],
          ['first', 'second', { outcome: 'event' }],
        ],
      ),
    );
    const purchase: AutomationEvent = { id: uid('event'), name: 'purchase', data: {} };
    await withWorkers(t.env, x.activities(), async (taskQueue) => {
      const handle = await x.start(taskQueue);
      await eventually(() => x.calls('beginWait').length === 1, 'the first wait');
      await handle.signal(automationEventSignal, purchase);
      await eventually(() => x.calls('beginWait').length === 2, 'the second wait');
      await handle.signal(automationEventSignal, purchase);
      await handle.result();
    });
    expect(x.calls('beginWait')[1]).toMatchObject({ stepId: 'second', closed: { seq: 2, outcome: 'event', event: purchase } });
    expect(x.calls('finish')).toEqual([expect.objectContaining({ status: 'COMPLETED', closed: { seq: 3, outcome: 'timeout' } })]);
  });

  test('cancelled during a wait, the execution records CANCELLED', async () => {
    const x = new FakeExecution(
      definition(
        [
          { id: 'wait', type: 'DELAY', config: { amount: 30, unit: 'days' } },
          { id: 'mail', type: 'SEND_EMAIL' },
        ],
        [
          ['trigger', 'wait'],
          ['wait', 'mail'],
        ],
      ),
    );
    const failed = await withWorkers(t.env, x.activities(), async (taskQueue) => {
      const handle = await x.start(taskQueue);
      await eventually(() => x.calls('beginWait').length === 1, 'the wait to begin');
      await handle.cancel();
      return await handle.result().catch((err) => err);
    });
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).cause).toBeInstanceOf(CancelledFailure);
    expect(x.calls('runStep')).toEqual([]);
    expect(x.calls('finish')).toEqual([expect.objectContaining({ status: 'CANCELLED' })]);
  });
});

describe('webhooks', () => {
  const hookThenMail = () =>
    definition(
      [
        { id: 'hook', type: 'WEBHOOK' },
        { id: 'mail', type: 'SEND_EMAIL' },
      ],
      [
        ['trigger', 'hook'],
        ['hook', 'mail'],
      ],
    );

  test('a webhook failing (5xx, timeout) is tried again with backoff, then the execution goes on', async () => {
    const x = new FakeExecution(hookThenMail());
    x.webhook = async (attempt) => {
      if (attempt < 3) throw new Error('503 Service Unavailable');
      return { status: 200 };
    };
    expect(await x.execute()).toBeUndefined();
    const hooks = x.calls('webhook');
    expect(hooks).toHaveLength(3);
    // Backoff of 2 s, then 4 s, in skipped time.
    expect(hooks[1].at - hooks[0].at).toBeGreaterThanOrEqual(2000);
    expect(hooks[2].at - hooks[1].at).toBeGreaterThanOrEqual(4000);
    expect(x.path).toEqual(['hook', 'hook', 'hook', 'mail']);
  });

  test('a refused webhook (WebhookRefused) is not tried again: the execution fails with its reason', async () => {
    const x = new FakeExecution(hookThenMail());
    // Even marked retryable, the type is in the retry policy's nonRetryableErrorTypes.
    x.webhook = async () => {
      throw ApplicationFailure.retryable('404 Not Found', 'WebhookRefused');
    };
    const failed = await x.execute();
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect((failed as WorkflowFailedError).cause).toMatchObject({ type: 'AutomationFailed', message: '404 Not Found' });
    expect(x.calls('webhook')).toHaveLength(1);
    expect(x.calls('finish')).toEqual([expect.objectContaining({ status: 'FAILED', error: '404 Not Found' })]);
  });

  test('a webhook failing four times fails the execution', async () => {
    const x = new FakeExecution(hookThenMail());
    x.webhook = async () => {
      throw new Error('connect ETIMEDOUT');
    };
    const failed = await x.execute();
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect(x.calls('webhook')).toHaveLength(4);
    expect(x.calls('finish')).toEqual([expect.objectContaining({ status: 'FAILED', error: 'connect ETIMEDOUT' })]);
  });
});
