import { workflowIds } from '../../temporal/workflow-ids';
import { bulkJobWorkflow } from '../../temporal/workflows';
import { type MockActivities, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

test('runs chunk after chunk of the job until one answers done, then ends', async () => {
  const jobId = uid('job');
  let left = 3;
  const runBulkJobChunk = jest.fn(async () => ({ done: --left === 0 }));
  await withWorkers(t.env, { runBulkJobChunk } satisfies MockActivities, (taskQueue) =>
    t.env.client.workflow.execute(bulkJobWorkflow, { taskQueue, workflowId: workflowIds.bulkJob(jobId), args: [{ jobId }] }),
  );
  expect(runBulkJobChunk.mock.calls).toEqual([[{ jobId }], [{ jobId }], [{ jobId }]]);
});

test('a chunk that fails is tried again (skipped backoff) and the job goes on from there', async () => {
  const jobId = uid('job');
  const outcomes = ['ok', 'fail', 'fail', 'ok', 'done'];
  const runBulkJobChunk = jest.fn(async () => {
    const outcome = outcomes.shift();
    if (outcome === 'fail') throw new Error('could not serialize access');
    return { done: outcome === 'done' };
  });
  await withWorkers(t.env, { runBulkJobChunk }, (taskQueue) =>
    t.env.client.workflow.execute(bulkJobWorkflow, { taskQueue, workflowId: workflowIds.bulkJob(jobId), args: [{ jobId }] }),
  );
  expect(runBulkJobChunk).toHaveBeenCalledTimes(5);
  expect(outcomes).toEqual([]);
});
