import { Connection } from '@temporalio/client';
import { InternalConnectionOptionsSymbol } from '@temporalio/client/lib/connection';
import Long from 'long';
import { startDevServer, type DevServer } from '@postbox/temporal-devserver';
import { createTestDatabase, dbQuery } from '../setup/db';
import { createAccount, startTestService, type TestService } from '../setup/service';

/**
 * Executions waiting on a two-day DELAY and on an event survive a restart of the whole service (API,
 * workers and Temporal, which here is the dev server, durable in PostgreSQL, with time skipping so
 * that two days pass in seconds).
 */
test('a 2-day delay and a wait for an event survive a restart of the service and of Temporal', async () => {
  const databaseUrl = await createTestDatabase();
  const temporalAt = (port = 0) => startDevServer({ port, timeSkipping: true, persistence: { kind: 'postgres', url: databaseUrl } });
  let temporal: DevServer = await temporalAt();
  const env = {
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporal.address,
    JWT_SECRET: 'restart test secret value',
    DISPATCH_IDLE_SECONDS: '1',
    ACTIVITY_FOLD_SECONDS: '86400',
  };
  let svc: TestService = await startTestService(env);
  try {
    const acct = await createAccount(svc.api);
    const key = { key: acct.project.secretKey };
    const pub = { key: acct.project.publicKey };
    const flow = async (trigger: string, steps: Array<Record<string, unknown>>, edges: Array<[number, number, Record<string, string>?]>) => {
      const w = (await svc.api.post('/workflows', { name: trigger, eventName: trigger }, key)).body;
      const ids = [w.steps[0].id];
      for (const s of steps) ids.push((await svc.api.post(`/workflows/${w.id}/steps`, s, key)).body.id);
      for (const [a, b, extra] of edges) await svc.api.post(`/workflows/${w.id}/transitions`, { fromStepId: ids[a], toStepId: ids[b], ...extra }, key);
      expect((await svc.api.patch(`/workflows/${w.id}`, { enabled: true }, key)).status).toBe(200);
      return w.id as string;
    };
    const delayed = await flow(
      'signup',
      [
        { type: 'DELAY', name: 'two days', config: { amount: 2, unit: 'days' } },
        { type: 'UPDATE_CONTACT', name: 'mark', config: { updates: { after: 'delay' } } },
      ],
      [
        [0, 1],
        [1, 2],
      ],
    );
    const waiting = await flow(
      'trial',
      [
        { type: 'WAIT_FOR_EVENT', name: 'paid?', config: { eventName: 'paid', timeout: 30 * 86_400 } },
        { type: 'UPDATE_CONTACT', name: 'paid', config: { updates: { after: 'paid' } } },
        { type: 'UPDATE_CONTACT', name: 'expired', config: { updates: { after: 'timeout' } } },
      ],
      [
        [0, 1],
        [1, 2, { outcome: 'event' }],
        [1, 3, { outcome: 'timeout' }],
      ],
    );
    await svc.api.post('/v1/track', { email: 'later@restart.test', event: 'signup' }, pub);
    await svc.api.post('/v1/track', { email: 'buyer@restart.test', event: 'trial' }, pub);
    const statusOf = async (workflowId: string) =>
      (await dbQuery(databaseUrl, `SELECT status FROM workflow_executions WHERE workflow_id = $1`, [workflowId]))[0]?.status;
    const until = async (probe: () => Promise<boolean>) => {
      const deadline = Date.now() + 60_000;
      while (!(await probe())) {
        if (Date.now() > deadline) throw new Error('timed out');
        await new Promise((r) => setTimeout(r, 200));
      }
    };
    await until(async () => (await statusOf(delayed)) === 'WAITING' && (await statusOf(waiting)) === 'WAITING');

    // Everything stops: the service, then Temporal. Then both come back.
    await svc.stop();
    const port = temporal.port;
    await temporal.stop();
    temporal = await temporalAt(port);
    svc = await startTestService(env);

    await svc.api.post('/v1/track', { email: 'buyer@restart.test', event: 'paid' }, pub);
    await until(async () => (await statusOf(waiting)) === 'COMPLETED');
    // Two days have not passed yet: the delayed execution still sleeps on its durable timer.
    expect(await statusOf(delayed)).toBe('WAITING');

    // Two days pass: the test service, as @temporalio/testing reaches it, unlocks time skipping and
    // sleeps; with nothing in flight (dispatchers sleep between drains) time jumps to each timer.
    const connection = await Connection.connect({ address: temporal.address, [InternalConnectionOptionsSymbol]: { supportsTestService: true } } as never);
    try {
      await connection.testService!.unlockTimeSkippingWithSleep({ duration: { seconds: Long.fromNumber(2 * 86_400 + 60) } });
    } finally {
      await connection.close();
    }
    await until(async () => (await statusOf(delayed)) === 'COMPLETED');
    const data = async (email: string) => (await dbQuery(databaseUrl, `SELECT data FROM contacts WHERE email = $1`, [email]))[0].data;
    expect(await data('later@restart.test')).toEqual({ after: 'delay' });
    expect(await data('buyer@restart.test')).toEqual({ after: 'paid' });
  } finally {
    await svc.stop();
    await temporal.stop();
  }
}, 180_000);
