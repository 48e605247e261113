/**
 * The gRPC port under a connection flood: past its total and per-client limits connections are closed
 * as they arrive, and one that sends no HTTP/2 preface is closed soon; the SDK's client and worker that
 * connected before keep working throughout, and a client connecting after the flood is served.
 */
import net from 'node:net';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { startDevServer } from '../src';
import * as workflows from './fixtures/workflows';
import { fileTestEnv, uid } from './helpers/env';

const LIMITS = { maxConnections: 24, maxConnectionsPerClient: 6 };
const file = fileTestEnv({ server: LIMITS });

const port = () => Number(file.env.server.address.split(':')[1]);

interface Flood {
  /** Connections the server still holds. */
  held(): number;
  /** Connections the server closed. */
  closed(): number;
  end(): void;
}

/**
 * Opens `count` idle connections to `port` from the loopback source addresses `sources` (in turn), and
 * resolves once each has connected or failed and the server has had a moment to close the refused.
 */
async function flood(targetPort: number, count: number, sources: string[], send?: Buffer): Promise<Flood> {
  const open = new Set<net.Socket>();
  let closed = 0;
  await Promise.all(
    Array.from(
      { length: count },
      (_, i) =>
        new Promise<void>((resolve) => {
          const socket = net.connect({ port: targetPort, host: '127.0.0.1', localAddress: sources[i % sources.length] });
          socket.on('connect', () => {
            open.add(socket);
            if (send) socket.write(send);
            resolve();
          });
          socket.on('error', () => undefined);
          socket.on('close', () => {
            if (open.delete(socket)) closed++;
            resolve();
          });
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 500));
  floods.push(open);
  return {
    held: () => open.size,
    closed: () => closed,
    end: () => {
      for (const socket of open) socket.destroy();
    },
  };
}

/** Every flood's sockets, closed after each test whatever its outcome. */
const floods: Array<Set<net.Socket>> = [];
afterEach(() => {
  for (const open of floods.splice(0)) for (const socket of open) socket.destroy();
});

const sources = (from: number, n: number) => Array.from({ length: n }, (_, i) => `127.0.0.${from + i}`);

test('a flood past the limits is closed as it arrives; the client and worker connected before keep working, a new client after it', async () => {
  await file.env.startWorker();
  const taskQueue = file.env.taskQueue;
  // The client and the worker connected before the flood (from 127.0.0.1).
  expect(await file.env.client.workflow.execute(workflows.echoWorkflow, { taskQueue, workflowId: uid('before'), args: ['before'] })).toBe('before');

  // Ten times the total, from many addresses: the server holds at most its total (the two SDK connections among them).
  const attack = await flood(port(), 10 * LIMITS.maxConnections, sources(2, 40));
  try {
    expect(attack.held()).toBeLessThanOrEqual(LIMITS.maxConnections - 2);
    expect(attack.closed()).toBeGreaterThanOrEqual(9 * LIMITS.maxConnections);
    // A newcomer is closed too, while the client and the worker made before carry on.
    const late = await flood(port(), 1, ['127.0.0.1']);
    expect(late.closed()).toBe(1);
    expect(await file.env.client.workflow.execute(workflows.echoWorkflow, { taskQueue, workflowId: uid('during'), args: ['during'] })).toBe('during');
  } finally {
    attack.end();
  }

  // After the flood a new client connects and runs a workflow.
  await new Promise((r) => setTimeout(r, 200));
  const connection = await Connection.connect({ address: file.env.server.address, connectTimeout: 5000 });
  try {
    const client = new Client({ connection, namespace: file.env.namespace });
    expect(await client.workflow.execute(workflows.echoWorkflow, { taskQueue, workflowId: uid('after'), args: ['after'] })).toBe('after');
  } finally {
    await connection.close();
  }
});

test('one client address holds at most its share of connections; the others are still served', async () => {
  const oneClient = await flood(port(), 4 * LIMITS.maxConnectionsPerClient, ['127.0.0.50']);
  try {
    expect(oneClient.held()).toBe(LIMITS.maxConnectionsPerClient);
    expect(oneClient.closed()).toBe(3 * LIMITS.maxConnectionsPerClient);
    const other = await flood(port(), 1, ['127.0.0.51']);
    expect(other.held()).toBe(1);
    other.end();
  } finally {
    oneClient.end();
  }
});

test('a connection that sends no HTTP/2 preface in time is closed, and one that sends something else at once', async () => {
  const server = await startDevServer({ log: pino({ level: 'silent' }), prefaceTimeoutMs: 3000 });
  try {
    const serverPort = Number(server.address.split(':')[1]);
    const silent = await flood(serverPort, 3, ['127.0.0.1']);
    expect(silent.held()).toBe(3);
    const http1 = await flood(serverPort, 1, ['127.0.0.1'], Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    expect(http1.closed()).toBe(1);
    await new Promise((r) => setTimeout(r, 3000));
    expect(silent.closed()).toBe(3);
    // A real client sends its preface at once and is served.
    const connection = await Connection.connect({ address: server.address, connectTimeout: 5000 });
    await connection.workflowService.getSystemInfo({});
    await connection.close();
  } finally {
    await server.stop();
  }
});
