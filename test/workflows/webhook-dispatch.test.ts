import { workflowIds } from '../../temporal/workflow-ids';
import { webhookDispatchWorkflow } from '../../temporal/workflows';
import { dispatchLoopTests } from './dispatch-loop';
import { workflowTestEnv } from './env';

const t = workflowTestEnv();

// webhook-dispatch:<n>: drains due webhook deliveries and sleeps until the next retry comes due or it is woken.
dispatchLoopTests(t, {
  workflow: webhookDispatchWorkflow,
  args: () => [{ shard: 0 }],
  workflowId: (taskQueue) => `${workflowIds.webhookDispatch(0)}:${taskQueue}`,
  workers: (drain) => ({ activities: { drainWebhookDeliveries: async () => ({ sent: 0, ...(await drain()) }) } }),
});
