/**
 * In memory mode, closed runs beyond the retention limit are forgotten, so memory stays flat; open
 * runs are never evicted. (Durable mode keeps evicted runs readable: see the PostgreSQL suite, which
 * runs with a tiny in-memory limit.)
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import type { WorkflowBundle } from '@temporalio/worker';
import * as workflows from './fixtures/workflows';
import { bundleWorkflows, TestEnv, uid } from './helpers/env';

const external = !!process.env.TEMPORAL_ADDRESS;
let bundle: WorkflowBundle;
let env: TestEnv;

beforeAll(async () => {
  if (external) return;
  bundle = await bundleWorkflows();
  env = await TestEnv.create({ bundle, server: { maxClosedInMemory: 2 } });
  await env.startWorker();
});

afterAll(async () => {
  await env?.teardown();
});

(external ? test.skip : test)('only the most recent closed runs are kept; open runs stay', async () => {
  const open = await env.client.workflow.start(workflows.waitForSignal, { taskQueue: env.taskQueue, workflowId: uid('open') });
  const done = [];
  for (let i = 0; i < 3; i++) {
    const h = await env.client.workflow.start(workflows.echoWorkflow, { taskQueue: env.taskQueue, workflowId: uid('closed'), args: [String(i)] });
    await h.result();
    done.push(h);
  }
  await expect(done[0].describe()).rejects.toBeInstanceOf(WorkflowNotFoundError);
  expect((await done[1].describe()).status.name).toBe('COMPLETED');
  expect((await done[2].describe()).status.name).toBe('COMPLETED');
  expect((await open.describe()).status.name).toBe('RUNNING');
  expect((await env.client.workflow.count(`ExecutionStatus = 'Completed'`)).count).toBe(2);
  await open.terminate('done');
});
