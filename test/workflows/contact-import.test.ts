import { workflowIds } from '../../temporal/workflow-ids';
import { contactImportWorkflow } from '../../temporal/workflows';
import { type MockActivities, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

test('reads slice after slice of the upload until one answers done, then ends', async () => {
  const jobId = uid('import');
  let left = 4;
  const importContactsSlice = jest.fn(async () => ({ done: --left === 0 }));
  await withWorkers(t.env, { importContactsSlice } satisfies MockActivities, (taskQueue) =>
    t.env.client.workflow.execute(contactImportWorkflow, { taskQueue, workflowId: workflowIds.contactImport(jobId), args: [{ jobId }] }),
  );
  expect(importContactsSlice.mock.calls).toEqual([[{ jobId }], [{ jobId }], [{ jobId }], [{ jobId }]]);
});

test('a slice that fails is tried again (skipped backoff) and the import goes on from there', async () => {
  const jobId = uid('import');
  const outcomes = ['ok', 'fail', 'done'];
  const importContactsSlice = jest.fn(async () => {
    const outcome = outcomes.shift();
    if (outcome === 'fail') throw new Error('connection terminated');
    return { done: outcome === 'done' };
  });
  await withWorkers(t.env, { importContactsSlice }, (taskQueue) =>
    t.env.client.workflow.execute(contactImportWorkflow, { taskQueue, workflowId: workflowIds.contactImport(jobId), args: [{ jobId }] }),
  );
  expect(importContactsSlice).toHaveBeenCalledTimes(3);
  expect(outcomes).toEqual([]);
});
