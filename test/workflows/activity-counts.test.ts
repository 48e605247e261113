import { workflowIds } from '../../temporal/workflow-ids';
import { activityCountsFoldWorkflow } from '../../temporal/workflows';
import { type MockActivities, scheduledAt, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

const workflowId = () => `${workflowIds.activityCounts()}:${uid('run')}`;

test('one run folds the pending deltas once and answers how many it folded', async () => {
  const foldActivityCounts = jest.fn(async () => ({ folded: 42 }));
  const folded = await withWorkers(t.env, { foldActivityCounts } satisfies MockActivities, (taskQueue) =>
    t.env.client.workflow.execute(activityCountsFoldWorkflow, { taskQueue, workflowId: workflowId() }),
  );
  expect(folded).toBe(42);
  expect(foldActivityCounts).toHaveBeenCalledTimes(1);
});

test('a fold that fails is tried again after 10 s (skipped time), and its count is the answer', async () => {
  const attempts: number[] = [];
  const foldActivityCounts = jest.fn(async () => {
    attempts.push(scheduledAt());
    if (attempts.length === 1) throw new Error('deadlock detected');
    return { folded: 5 };
  });
  const folded = await withWorkers(t.env, { foldActivityCounts }, (taskQueue) =>
    t.env.client.workflow.execute(activityCountsFoldWorkflow, { taskQueue, workflowId: workflowId() }),
  );
  expect(folded).toBe(5);
  expect(Math.round((attempts[1] - attempts[0]) / 1000)).toBe(10);
});
