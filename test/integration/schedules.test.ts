/**
 * The service's periodic work runs as Temporal Schedules: created by the first worker (acting once at
 * once), brought in line with a later worker's settings.
 */
import { Client, Connection } from '@temporalio/client';
import { startDevServer, type DevServer } from '@postbox/temporal-devserver';
import { startTestService, type TestService } from '../setup/service';
import { until } from '../setup/until';

let temporal: DevServer;
let connection: Connection;
let client: Client;

beforeAll(async () => {
  temporal = await startDevServer({ persistence: { kind: 'memory' } });
  connection = await Connection.connect({ address: temporal.address });
  client = new Client({ connection });
});

afterAll(async () => {
  await connection.close();
  await temporal.stop();
});

test('maintenance and activity-counts are schedules that follow the settings', async () => {
  let svc: TestService = await startTestService({ TEMPORAL_ADDRESS: temporal.address, ACTIVITY_FOLD_SECONDS: '30' });
  let created: Date;
  let firstFold: string;
  try {
    const maintenance = client.schedule.getHandle('maintenance');
    const counts = client.schedule.getHandle('activity-counts');
    expect((await maintenance.describe()).spec.intervals).toEqual([{ every: 600_000 }]);
    expect((await counts.describe()).spec.intervals).toEqual([{ every: 30_000 }]);
    // Each acted once at creation, and that run finished on the service's worker.
    for (const [handle, workflowType] of [
      [maintenance, 'maintenancePurgeWorkflow'],
      [counts, 'activityCountsFoldWorkflow'],
    ] as const) {
      const run = await until(async () => {
        const d = await handle.describe();
        const last = d.info.recentActions[0];
        return last && (await client.workflow.getHandle(last.action.workflow.workflowId).describe()).status.name === 'COMPLETED' ? last : undefined;
      });
      expect(run.action.workflow.workflowId).toMatch(new RegExp(`^${handle.scheduleId}-\\d{4}-`));
      expect((await client.workflow.getHandle(run.action.workflow.workflowId).describe()).type).toBe(workflowType);
    }
    const d = await counts.describe();
    created = d.info.createdAt;
    firstFold = d.info.recentActions[0].action.workflow.workflowId;
  } finally {
    await svc.stop();
  }

  svc = await startTestService({ TEMPORAL_ADDRESS: temporal.address, ACTIVITY_FOLD_SECONDS: '45' });
  try {
    const d = await client.schedule.getHandle('activity-counts').describe();
    expect(d.spec.intervals).toEqual([{ every: 45_000 }]);
    // Updated in place, not created again, and not acting at once again: the same creation time, its
    // first action still first, and any later one at a time of the interval itself (intervals count from
    // the epoch, so a 30 s one can come due while this test runs).
    expect(d.info.createdAt).toEqual(created!);
    const [first, ...later] = d.info.recentActions;
    expect(first.action.workflow.workflowId).toBe(firstFold!);
    for (const a of later) expect([30_000, 45_000].some((every) => a.scheduledAt.getTime() % every === 0)).toBe(true);
  } finally {
    await svc.stop();
  }
});
