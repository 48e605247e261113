import { workflowIds } from '../../temporal/workflow-ids';
import { maintenancePurgeWorkflow } from '../../temporal/workflows';
import { type MockActivities, scheduledAt, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

const purged = { idempotencyKeys: 3, rateLimitWindows: 2, webhookDeliveries: 1, inboundReports: 0, inboundEmails: 0, pendingTopicsExpired: 0 };
const workflowId = () => `${workflowIds.maintenance()}:${uid('run')}`;

test('one run of the schedule purges once and completes', async () => {
  const purgeExpired = jest.fn(async () => purged);
  await withWorkers(t.env, { purgeExpired } satisfies MockActivities, (taskQueue) =>
    t.env.client.workflow.execute(maintenancePurgeWorkflow, { taskQueue, workflowId: workflowId() }),
  );
  expect(purgeExpired).toHaveBeenCalledTimes(1);
});

test('a purge that fails (the database away) is tried again after 10 s, then 20 s, in skipped time', async () => {
  const attempts: number[] = [];
  const purgeExpired = jest.fn(async () => {
    attempts.push(scheduledAt());
    if (attempts.length < 3) throw new Error('connection refused');
    return purged;
  });
  const wallStart = Date.now();
  await withWorkers(t.env, { purgeExpired }, (taskQueue) => t.env.client.workflow.execute(maintenancePurgeWorkflow, { taskQueue, workflowId: workflowId() }));
  expect(purgeExpired).toHaveBeenCalledTimes(3);
  expect(attempts.slice(1).map((at, i) => Math.round((at - attempts[i]) / 1000))).toEqual([10, 20]);
  expect(Date.now() - wallStart).toBeLessThan(15_000);
});
