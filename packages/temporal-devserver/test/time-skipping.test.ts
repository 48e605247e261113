/**
 * Time skipping through @temporalio/testing's own TestWorkflowEnvironment, launching our
 * `bin/temporal-devserver-test` exactly as it would launch Temporal's Java test server.
 */
import path from 'node:path';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker, type WorkflowBundle } from '@temporalio/worker';
import { createActivities } from './fixtures/activities';
import * as workflows from './fixtures/workflows';
import { bundleWorkflows, uid } from './helpers/env';

const TEST_SERVER = path.join(__dirname, '..', 'bin', 'temporal-devserver-test');
const THREE_DAYS = 3 * 24 * 60 * 60 * 1000;

let bundle: WorkflowBundle;
let env: TestWorkflowEnvironment;

beforeAll(async () => {
  // The launched server runs from the TypeScript sources, so tests never see a stale build.
  process.env.TEMPORAL_DEVSERVER_FROM_SOURCE = '1';
  bundle = await bundleWorkflows();
  env = await TestWorkflowEnvironment.createTimeSkipping({ server: { executable: { type: 'existing-path', path: TEST_SERVER } } });
});

afterAll(async () => {
  await env?.teardown();
});

async function withWorker<T>(fn: (taskQueue: string) => Promise<T>): Promise<T> {
  const taskQueue = uid('ts');
  const worker = await Worker.create({
    connection: env.nativeConnection,
    taskQueue,
    workflowBundle: bundle,
    activities: createActivities({ asyncCompletions: [] }),
  });
  return await worker.runUntil(fn(taskQueue));
}

test('a workflow sleeping three days completes in seconds', async () => {
  const wallStart = Date.now();
  const serverStart = await env.currentTimeMs();
  const result = await withWorker((taskQueue) =>
    env.client.workflow.execute(workflows.sleeper, { taskQueue, workflowId: uid('three-days'), args: [THREE_DAYS] }),
  );
  expect(result).toBe(`slept ${THREE_DAYS}`);
  expect(Date.now() - wallStart).toBeLessThan(30_000);
  expect((await env.currentTimeMs()) - serverStart).toBeGreaterThanOrEqual(THREE_DAYS);
});

test('time does not skip while an activity runs', async () => {
  const result = await withWorker((taskQueue) => env.client.workflow.execute(workflows.raceActivityAndTimer, { taskQueue, workflowId: uid('race') }));
  expect(result).toBe('activity');
});

test('a signalled workflow skips its hour-long timer when its result is awaited', async () => {
  const serverStart = await env.currentTimeMs();
  const result = await withWorker(async (taskQueue) => {
    const handle = await env.client.workflow.start(workflows.timerAndSignal, { taskQueue, workflowId: uid('timer'), args: [60 * 60 * 1000] });
    await handle.signal(workflows.unblock, 'early');
    return await handle.result();
  });
  expect(result).toBe('timer fired, signal early');
  expect((await env.currentTimeMs()) - serverStart).toBeGreaterThanOrEqual(60 * 60 * 1000);
});

test('env.sleep skips time; the clock is the server clock', async () => {
  const before = await env.currentTimeMs();
  const wallStart = Date.now();
  await env.sleep('2 days');
  expect((await env.currentTimeMs()) - before).toBeGreaterThanOrEqual(2 * 24 * 60 * 60 * 1000);
  expect(Date.now() - wallStart).toBeLessThan(10_000);
});
