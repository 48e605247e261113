/**
 * Time skipping in durable mode: skipped time is not stored, but after a restart the clock resumes
 * no earlier than the latest event of the open runs, so time never runs backwards for a workflow.
 */
import { Client, Connection, type ConnectionOptions } from '@temporalio/client';
import { InternalConnectionOptionsSymbol } from '@temporalio/client/lib/connection';
import { NativeConnection, Worker } from '@temporalio/worker';
import { startDevServer, type DevServer } from '../src';
import { createActivities } from './fixtures/activities';
import * as workflows from './fixtures/workflows';
import { bundleWorkflows, eventually, installRuntime, uid } from './helpers/env';
import { createTestDatabase } from './helpers/postgres';

const DAY = 24 * 60 * 60 * 1000;

async function serverTime(address: string): Promise<number> {
  // The internal option is how @temporalio/testing itself asks for the TestService client.
  const c = await Connection.connect({ address, [InternalConnectionOptionsSymbol]: { supportsTestService: true } } as ConnectionOptions);
  try {
    const { time } = await c.testService!.getCurrentTime({});
    return Number(time!.seconds) * 1000 + Math.floor((time!.nanos ?? 0) / 1e6);
  } finally {
    await c.close();
  }
}

test('the skipped clock survives a restart; the run then completes', async () => {
  installRuntime();
  const bundle = await bundleWorkflows();
  const url = await createTestDatabase();
  const start = (port = 0) => startDevServer({ port, persistence: { kind: 'postgres', url }, timeSkipping: true, timeSkippingStartsUnlocked: true });
  let server: DevServer = await start();
  const taskQueue = uid('skip-durable');
  const run = async <T>(fn: (client: Client) => Promise<T>): Promise<T> => {
    const nativeConnection = await NativeConnection.connect({ address: server.address });
    const connection = await Connection.connect({ address: server.address });
    const worker = await Worker.create({
      connection: nativeConnection,
      taskQueue,
      workflowBundle: bundle,
      activities: createActivities({ asyncCompletions: [] }),
    });
    try {
      return await worker.runUntil(fn(new Client({ connection })));
    } finally {
      await connection.close();
      await nativeConnection.close();
    }
  };
  try {
    const before = await serverTime(server.address);
    const workflowId = uid('timer');
    await run(async (client) => {
      const handle = await client.workflow.start(workflows.timerAndSignal, { taskQueue, workflowId, args: [DAY] });
      // The day-long timer is skipped; the run then waits for the signal.
      await eventually(async () => expect((await handle.fetchHistory()).events!.some((e) => e.timerFiredEventAttributes)).toBe(true), 30_000);
    });
    const skipped = await serverTime(server.address);
    expect(skipped - before).toBeGreaterThanOrEqual(DAY);

    const port = server.port;
    await server.stop();
    server = await start(port);
    expect(await serverTime(server.address)).toBeGreaterThanOrEqual(skipped - 1000);

    const result = await run(async (client) => {
      const handle = client.workflow.getHandle(workflowId);
      await handle.signal(workflows.unblock, 'after restart');
      return await handle.result();
    });
    expect(result).toBe('timer fired, signal after restart');
  } finally {
    await server.stop();
  }
}, 90_000);
