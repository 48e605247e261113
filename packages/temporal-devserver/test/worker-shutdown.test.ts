/**
 * What a worker sees when it connects and when it stops: its compressed first calls are taken on the
 * one connection it opened, and at shutdown the server answers its waiting polls (as it announces with
 * workerPollCompleteOnShutdown), so it stops at once and no workflow task is lost on the way.
 */
import net from 'node:net';
import { NativeConnection, Worker } from '@temporalio/worker';
import { temporal } from '@temporalio/proto';
import * as workflows from './fixtures/workflows';
import { createActivities } from './fixtures/activities';
import { eventually, fileTestEnv, uid } from './helpers/env';

/** A TCP relay in front of the server that counts the connections made through it. */
async function countingRelay(target: string): Promise<{ address: string; connections: () => number; close: () => void }> {
  const [host, port] = target.split(':');
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    connections++;
    const upstream = net.connect(Number(port), host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connections: () => connections,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const file = fileTestEnv();

test('a worker keeps the one connection it opened: its gzip-compressed calls are accepted', async () => {
  const relay = await countingRelay(file.env.server.address);
  try {
    const connection = await NativeConnection.connect({ address: relay.address });
    const taskQueue = uid('tq');
    const worker = await Worker.create({
      connection,
      namespace: file.env.namespace,
      taskQueue,
      workflowBundle: file.bundle,
      activities: createActivities({ asyncCompletions: [] }),
    });
    const run = worker.run();
    const result = await file.env.client.workflow.execute(workflows.activityScenario, { taskQueue, workflowId: uid('gzip'), args: ['retry-then-succeed'] });
    expect(result).toEqual({ result: 3 });
    worker.shutdown();
    await run;
    await connection.close();
    expect(relay.connections()).toBe(1);
  } finally {
    relay.close();
  }
});

test('namespaces announce poll completion on shutdown; a busy worker stops without waiting out its polls; no workflow task fails or times out', async () => {
  const ns = await file.env.connection.workflowService.describeNamespace({ namespace: file.env.namespace });
  expect(ns.namespaceInfo?.capabilities?.workerPollCompleteOnShutdown).toBe(true);

  await file.env.startWorker({ shutdownGraceTime: '10s' });
  const handles = await Promise.all(
    Array.from({ length: 5 }, () => file.env.client.workflow.start(workflows.busyLoop, { taskQueue: file.env.taskQueue, workflowId: uid('busy') })),
  );
  const E = temporal.api.enums.v1.EventType;
  const eventsOf = async (h: (typeof handles)[number]) => (await h.fetchHistory()).events ?? [];
  for (const h of handles)
    await eventually(async () => expect((await eventsOf(h)).some((e) => e.eventType === E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)).toBe(true));

  // Not a speed figure: a worker left to wait out its long polls (or to time out cancelled ones) takes a minute.
  const t0 = Date.now();
  await file.env.stopWorker();
  expect(Date.now() - t0).toBeLessThan(10_000);
  for (const h of handles) {
    const problems = (await eventsOf(h)).filter(
      (e) => e.eventType === E.EVENT_TYPE_WORKFLOW_TASK_FAILED || e.eventType === E.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    );
    expect(problems).toEqual([]);
  }
  for (const h of handles) await h.terminate('test cleanup');
});
