import { workflowIds } from '../../temporal/workflow-ids';
import { automationDispatchWorkflow } from '../../temporal/workflows';
import { dispatchLoopTests } from './dispatch-loop';
import { workflowTestEnv } from './env';

const t = workflowTestEnv();

// automation-dispatch:<n>: turns the automation outbox into starts and wake-ups, then sleeps until woken or due.
dispatchLoopTests(t, {
  workflow: automationDispatchWorkflow,
  args: () => [{ shard: 1 }],
  workflowId: (taskQueue) => `${workflowIds.automationDispatch(1)}:${taskQueue}`,
  workers: (drain) => ({ activities: { drainAutomationOutbox: async () => ({ started: 0, woken: 0, ...(await drain()) }) } }),
});
