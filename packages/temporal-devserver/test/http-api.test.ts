/**
 * The dev server's `/api/v1` HTTP API (what the Temporal Web UI calls), over real HTTP against a
 * real dev server, in memory and in PostgreSQL: canonical JSON, grpc-gateway errors, CSRF on
 * writes, cancel/terminate/signal, and CountWorkflowExecutions grouped by ExecutionStatus.
 */
import http from 'node:http';
import { Client, Connection } from '@temporalio/client';
import pino from 'pino';
import { type DevServer, startDevServer, type DevServerOptions } from '../src';
import { httpCallContext } from '../src/http/gateway';
import { hostAllowed } from '../src/http/ui-server';
import { registerSearchAttributes, uid } from './helpers/env';
import { createTestDatabase } from './helpers/postgres';

interface Reply {
  status: number;
  body: any;
  headers: Headers;
}

const CSRF = 'test-csrf-token-value';

async function call(base: string, method: string, path: string, body?: unknown, csrf: string | null = CSRF): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (csrf) {
    headers.cookie = `_csrf=${CSRF}`;
    headers['x-csrf-token'] = csrf;
  }
  const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

const modes: [string, () => Promise<DevServerOptions>][] = [
  ['memory', async () => ({})],
  ['postgres', async () => ({ persistence: { kind: 'postgres', url: await createTestDatabase() } })],
];

describe.each(modes)('HTTP API (%s)', (_mode, options) => {
  let server: DevServer;
  let connection: Connection;
  let client: Client;
  let base: string;
  const taskQueue = uid('http-tq');

  beforeAll(async () => {
    server = await startDevServer({ log: pino({ level: 'warn' }), ...(await options()), ui: { port: 0, app: false } });
    base = server.ui!.url;
    connection = await Connection.connect({ address: server.address });
    client = new Client({ connection });
    await registerSearchAttributes(connection, 'default');
  });

  afterAll(async () => {
    await connection?.close();
    await server?.stop();
  });

  const start = (workflowId: string, projectId = 'p-1') =>
    client.workflow.start('noWorkerNeeded', {
      taskQueue,
      workflowId,
      args: [{ hello: 'world' }],
      searchAttributes: { ProjectId: [projectId] },
    });

  test('settings answer like ui-server, with the dev server’s writes enabled', async () => {
    const res = await call(base, 'GET', '/api/v1/settings');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      Auth: { Enabled: false },
      DefaultNamespace: 'default',
      DisableWriteActions: false,
      WorkflowCancelDisabled: false,
      WorkflowTerminateDisabled: false,
      WorkflowSignalDisabled: false,
      WorkflowResetDisabled: true,
      BatchActionsDisabled: true,
      NotifyOnNewVersion: false,
    });
    expect(res.body.Version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  test('namespaces, cluster, system info and search attributes in canonical JSON', async () => {
    const ns = await call(base, 'GET', '/api/v1/namespaces');
    expect(ns.status).toBe(200);
    const def = ns.body.namespaces.find((n: any) => n.namespaceInfo.name === 'default');
    expect(def.namespaceInfo.state).toBe('NAMESPACE_STATE_REGISTERED');
    expect(def.config.workflowExecutionRetentionTtl).toMatch(/^\d+s$/);

    const info = await call(base, 'GET', '/api/v1/system-info');
    expect(info.body.capabilities.countGroupByExecutionStatus).toBe(true);
    expect((await call(base, 'GET', '/api/v1/cluster-info')).body.clusterName).toBe('active');

    const sa = await call(base, 'GET', '/api/v1/namespaces/default/search-attributes');
    expect(sa.body.customAttributes.ProjectId).toBe('INDEXED_VALUE_TYPE_KEYWORD');
    expect(sa.body.systemAttributes.ExecutionStatus).toBe('INDEXED_VALUE_TYPE_KEYWORD');
  });

  test('list by visibility query, describe and history of a run', async () => {
    const project = uid('proj');
    const id = `contact-snooze:${uid('c')}`;
    const handle = await start(id, project);
    const q = encodeURIComponent(`ProjectId = "${project}"`);

    const list = await call(base, 'GET', `/api/v1/namespaces/default/workflows?query=${q}&pageSize=10`);
    expect(list.status).toBe(200);
    expect(list.body.executions).toHaveLength(1);
    const exec = list.body.executions[0];
    expect(exec.execution).toEqual({ workflowId: id, runId: handle.firstExecutionRunId });
    expect(exec.type.name).toBe('noWorkerNeeded');
    expect(exec.status).toBe('WORKFLOW_EXECUTION_STATUS_RUNNING');
    expect(exec.startTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3,9})?Z$/);
    expect(typeof exec.historyLength).toBe('string'); // int64
    expect(exec.searchAttributes.indexedFields.ProjectId.metadata.encoding).toBe(Buffer.from('json/plain').toString('base64'));

    const path = `/api/v1/namespaces/default/workflows/${encodeURIComponent(id)}`;
    const described = await call(base, 'GET', `${path}?execution.runId=${handle.firstExecutionRunId}`);
    expect(described.status).toBe(200);
    expect(described.body.workflowExecutionInfo.execution.workflowId).toBe(id);
    expect(described.body.executionConfig.taskQueue.name).toBe(taskQueue);

    const history = await call(base, 'GET', `${path}/history?execution.runId=${handle.firstExecutionRunId}`);
    expect(history.status).toBe(200);
    const first = history.body.history.events[0];
    expect(first.eventId).toBe('1');
    expect(first.eventType).toBe('EVENT_TYPE_WORKFLOW_EXECUTION_STARTED');
    const input = first.workflowExecutionStartedEventAttributes.input.payloads[0];
    expect(JSON.parse(Buffer.from(input.data, 'base64').toString())).toEqual({ hello: 'world' });

    const reverse = await call(base, 'GET', `${path}/history-reverse?execution.runId=${handle.firstExecutionRunId}`);
    expect(reverse.status).toBe(200);
    expect(reverse.body.history.events.at(-1).eventId).toBe('1');

    const download = await call(base, 'GET', `${path}/run/${handle.firstExecutionRunId}/history.json`);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-disposition')).toContain('attachment');
    expect(download.body.events.map((e: { eventId: string }) => e.eventId)).toEqual(history.body.history.events.map((e: { eventId: string }) => e.eventId));
  });

  test('workflow-count groups by ExecutionStatus', async () => {
    const project = uid('proj');
    await start(uid('a'), project);
    await start(uid('b'), project);
    const done = await start(uid('c'), project);
    await done.terminate('test');
    const q = encodeURIComponent(`ProjectId = "${project}" GROUP BY ExecutionStatus`);
    const res = await call(base, 'GET', `/api/v1/namespaces/default/workflow-count?query=${q}`);
    expect(res.status).toBe(200);
    expect(res.body.count).toBe('3');
    const groups = Object.fromEntries(
      res.body.groups.map((g: { groupValues: { data: string }[]; count: string }) => [
        JSON.parse(Buffer.from(g.groupValues[0].data, 'base64').toString()),
        g.count,
      ]),
    );
    expect(groups).toEqual({ Running: '2', Terminated: '1' });

    const plain = await call(base, 'GET', `/api/v1/namespaces/default/workflow-count?query=${encodeURIComponent(`ProjectId = "${project}"`)}`);
    expect(plain.body).toEqual({ count: '3' });
    const listGrouped = await call(base, 'GET', `/api/v1/namespaces/default/workflows?query=${q}`);
    expect(listGrouped.status).toBe(400);
    expect(listGrouped.body.message).toContain('GROUP BY');
  });

  test('signal, cancel and terminate need the CSRF token and act on the run', async () => {
    const id = uid('act');
    const handle = await start(id);
    const path = `/api/v1/namespaces/default/workflows/${id}`;

    const denied = await call(base, 'POST', `${path}/cancel`, { workflowExecution: { runId: handle.firstExecutionRunId } }, null);
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe(7);
    const mismatched = await call(base, 'POST', `${path}/cancel`, {}, 'another-token-value-of-same-sz');
    expect(mismatched.status).toBe(403);

    const payload = { metadata: { encoding: Buffer.from('json/plain').toString('base64') }, data: Buffer.from('"ping"').toString('base64') };
    const signal = await call(base, 'POST', `${path}/signal/greet`, { input: { payloads: [payload] }, identity: 'web-ui' });
    expect(signal.status).toBe(200);
    const cancel = await call(base, 'POST', `${path}/cancel`, { reason: 'operator asked', identity: 'web-ui' });
    expect(cancel.status).toBe(200);

    const events = (await handle.fetchHistory()).events!;
    const signalled = events.find((e) => e.workflowExecutionSignaledEventAttributes);
    expect(signalled?.workflowExecutionSignaledEventAttributes?.signalName).toBe('greet');
    expect(events.some((e) => e.workflowExecutionCancelRequestedEventAttributes)).toBe(true);

    const terminate = await call(base, 'POST', `${path}/terminate`, { reason: 'operator stopped it' });
    expect(terminate.status).toBe(200);
    expect((await handle.describe()).status.name).toBe('TERMINATED');
    const again = await call(base, 'POST', `${path}/terminate`, {});
    expect(again.status).toBe(404);
  });

  test('schedules: list, describe, pause and trigger as the Web UI does them', async () => {
    const scheduleId = uid('ui-schedule');
    await client.schedule.create({
      scheduleId,
      spec: { intervals: [{ every: '1h' }] },
      action: { type: 'startWorkflow', workflowType: 'noWorkerNeeded', workflowId: uid('scheduled'), taskQueue },
    });
    const list = await call(base, 'GET', '/api/v1/namespaces/default/schedules');
    expect(list.body.schedules.map((x: { scheduleId: string }) => x.scheduleId)).toContain(scheduleId);
    const path = `/api/v1/namespaces/default/schedules/${scheduleId}`;
    expect((await call(base, 'POST', `${path}/patch`, { patch: { pause: 'paused from the UI' } })).status).toBe(200);
    expect((await call(base, 'POST', `${path}/patch`, { patch: { triggerImmediately: { overlapPolicy: 'SCHEDULE_OVERLAP_POLICY_ALLOW_ALL' } } })).status).toBe(
      200,
    );
    const described = await call(base, 'GET', path);
    expect(described.body.schedule.state).toMatchObject({ paused: true, notes: 'paused from the UI' });
    expect(described.body.info.actionCount).toBe('1');
    await client.schedule.getHandle(scheduleId).delete();
  });

  test('errors in grpc-gateway shape', async () => {
    const missing = await call(base, 'GET', `/api/v1/namespaces/default/workflows/${uid('nope')}`);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 5, details: [{ '@type': 'type.googleapis.com/temporal.api.errordetails.v1.NotFoundFailure' }] });
    expect(typeof missing.body.message).toBe('string');

    const badNs = await call(base, 'GET', '/api/v1/namespaces/no-such-ns/workflows');
    expect(badNs.status).toBe(404);
    expect(badNs.body.details[0]).toEqual({
      '@type': 'type.googleapis.com/temporal.api.errordetails.v1.NamespaceNotFoundFailure',
      namespace: 'no-such-ns',
    });

    const badQuery = await call(base, 'GET', `/api/v1/namespaces/default/workflows?query=${encodeURIComponent('Nope = 1')}`);
    expect(badQuery.status).toBe(400);
    expect(badQuery.body.code).toBe(3);

    const badParam = await call(base, 'GET', '/api/v1/namespaces/default/workflows?pageSize=many');
    expect(badParam.status).toBe(400);
    const unknownParam = await call(base, 'GET', '/api/v1/namespaces/default/workflows?colour=red');
    expect(unknownParam.status).toBe(400);
    const badBody = await call(base, 'POST', `/api/v1/namespaces/default/workflows/x/cancel`, { nonsense: true });
    expect(badBody.status).toBe(400);

    expect((await call(base, 'GET', '/api/v1/no/such/route')).status).toBe(404);
    const unimplemented = await call(base, 'GET', '/api/v1/namespaces/default/schedules');
    expect([200, 501]).toContain(unimplemented.status);
    if (unimplemented.status === 501) expect(unimplemented.body.code).toBe(12);
  });

  /** A request with the Host header given (fetch will not send a foreign one), its status, headers and body. */
  function rawRequest(
    method: string,
    path: string,
    headers: Record<string, string>,
    body?: string,
  ): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
    const url = new URL(base + path);
    return new Promise((resolve, reject) => {
      const req = http.request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }

  test('DNS rebinding: only Host values naming this machine on this port are answered', async () => {
    const port = new URL(base).port;
    for (const host of [`evil.test:${port}`, `evil.test`, `127.0.0.1:${Number(port) + 1}`, `localhost.evil.test:${port}`]) {
      const page = await rawRequest('GET', '/namespaces/default/workflows', { host });
      expect(page.status).toBe(421);
      expect(page.headers['set-cookie']).toBeUndefined();
      expect((await rawRequest('GET', '/api/v1/settings', { host })).status).toBe(421);
    }
    // A write under a foreign Host, with a valid token pair, reaches nothing.
    const id = uid('rebind');
    const handle = await start(id);
    const write = { host: `evil.test:${port}`, cookie: `_csrf=${CSRF}`, 'x-csrf-token': CSRF, 'content-type': 'application/json' };
    expect((await rawRequest('POST', `/api/v1/namespaces/default/workflows/${id}/terminate`, write, '{}')).status).toBe(421);
    expect((await handle.describe()).status.name).toBe('RUNNING');
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`]) {
      expect((await rawRequest('GET', '/api/v1/settings', { host })).status).toBe(200);
    }
    await handle.terminate();
    // Names the operator configured (ALLOWED_HOSTS): a bare name on any port, a name:port on that port only.
    expect(hostAllowed('ui.dev.test:9000', 8233, ['ui.dev.test'])).toBe(true);
    expect(hostAllowed('UI.dev.test', 8233, ['ui.dev.test'])).toBe(true);
    expect(hostAllowed('ops.test:9000', 8233, ['ops.test:9000'])).toBe(true);
    expect(hostAllowed('ops.test:9001', 8233, ['ops.test:9000'])).toBe(false);
    expect(hostAllowed('ui.dev.test.evil.test:9000', 8233, ['ui.dev.test'])).toBe(false);
    expect(hostAllowed('[::1]:8233', 8233)).toBe(true);
    expect(hostAllowed(undefined, 8233, ['ui.dev.test'])).toBe(false);
  });

  test('a write from another site is refused even with the CSRF token: Sec-Fetch-Site or Origin must name this UI', async () => {
    const id = uid('cross-site');
    const handle = await start(id);
    const host = new URL(base).host;
    const path = `/api/v1/namespaces/default/workflows/${id}/terminate`;
    const token = { host, cookie: `_csrf=${CSRF}`, 'x-csrf-token': CSRF, 'content-type': 'application/json' };
    const elsewhere: Array<Record<string, string>> = [
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'same-site' },
      { origin: 'http://evil.test' },
      { origin: 'null' },
    ];
    for (const from of elsewhere) {
      const refused = await rawRequest('POST', path, { ...token, ...from }, '{}');
      expect(refused.status).toBe(403);
      expect(JSON.parse(refused.body).code).toBe(7);
    }
    expect((await handle.describe()).status.name).toBe('RUNNING');
    expect((await rawRequest('POST', path, { ...token, 'sec-fetch-site': 'same-origin', origin: `http://${host}` }, '{}')).status).toBe(200);
    expect((await handle.describe()).status.name).toBe('TERMINATED');
  });

  test('history.json of a missing namespace or run is 404, not 500', async () => {
    const noNs = await call(base, 'GET', '/api/v1/namespaces/no-such-ns/workflows/w/run/r/history.json');
    expect(noNs.status).toBe(404);
    expect(noNs.body.code).toBe(5);
    const noRun = await call(base, 'GET', `/api/v1/namespaces/default/workflows/${uid('none')}/run/00000000-0000-0000-0000-000000000000/history.json`);
    expect(noRun.status).toBe(404);
  });

  test('pages answer 503 until the app is built', async () => {
    const res = await fetch(`${base}/namespaces/default/workflows`);
    expect(res.status).toBe(503);
    expect(await res.text()).toContain('being built');
  });
});

test('a taken UI port leaves the dev server running without its UI', async () => {
  const blocker = http.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => blocker.once('listening', resolve));
  const port = (blocker.address() as { port: number }).port;
  const server = await startDevServer({ log: pino({ level: 'silent' }), ui: { port, app: false } });
  try {
    expect(server.ui).toBeUndefined();
    const connection = await Connection.connect({ address: server.address });
    await expect(new Client({ connection }).workflowService.getSystemInfo({})).resolves.toBeDefined();
    await connection.close();
  } finally {
    await server.stop();
    blocker.close();
  }
});

test('an HTTP call is cancelled (as a gRPC one) when the client goes away, so long polls stop waiting', async () => {
  let cancelled: (() => void) | undefined;
  const gone = new Promise<void>((resolve) => (cancelled = resolve));
  let sawCancelled = false;
  const server = http.createServer((req, res) => {
    const ctx = httpCallContext(req, res);
    ctx.onCancel(() => {
      sawCancelled = ctx.cancelled;
      cancelled!();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const abort = new AbortController();
  const request = fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/`, { signal: abort.signal }).catch(() => 'aborted');
  await new Promise((r) => setTimeout(r, 100));
  abort.abort();
  await gone;
  expect(sawCancelled).toBe(true);
  expect(await request).toBe('aborted');
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
