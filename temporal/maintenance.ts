import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { TemporalClient } from './client';
import { workflowIds } from './task-queues';

async function ensureRunning(t: TemporalClient, workflowType: string, workflowId: string, args: unknown[] = []): Promise<void> {
  try {
    await t.client.workflow.start(workflowType, { workflowId, taskQueue: t.taskQueue, args, workflowIdConflictPolicy: 'USE_EXISTING' });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
}

/**
 * The service's standing executions: `maintenance` and the email and automation dispatchers. Every
 * worker process calls this at start; executions that already run are left as they are.
 */
export async function ensureStandingWorkflows(t: TemporalClient, opts: { emailDispatchers: number; automationDispatchers: number }): Promise<void> {
  await ensureRunning(t, 'maintenanceWorkflow', workflowIds.maintenance());
  for (let shard = 0; shard < opts.emailDispatchers; shard++) {
    await ensureRunning(t, 'emailDispatchWorkflow', workflowIds.emailDispatch(shard), [{ shard }]);
  }
  for (let shard = 0; shard < opts.automationDispatchers; shard++) {
    await ensureRunning(t, 'automationDispatchWorkflow', workflowIds.automationDispatch(shard), [{ shard }]);
  }
}
