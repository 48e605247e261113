import { workflowIds } from '../../temporal/workflow-ids';
import { segmentRefreshWorkflow } from '../../temporal/workflows';
import { type MockActivities, gapsInSeconds, runsOf, scripted, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

type Refresh = Awaited<ReturnType<NonNullable<MockActivities['refreshSegment']>>>;

/** A refreshSegment that answers `answers` in order (the last one again and again), recording when it ran. */
function refreshes(answers: Array<Refresh | Error>) {
  const { at, activity: refreshSegment } = scripted<[{ segmentId: string }], Refresh>(answers);
  return { at, activities: { refreshSegment } satisfies MockActivities, refreshSegment };
}

test('refreshes at once and then every SEGMENT_REFRESH_SECONDS (skipped time), and ends when the segment is gone', async () => {
  const segmentId = uid('segment');
  const { at, activities, refreshSegment } = refreshes([
    { exists: true, intervalSeconds: 900 },
    { exists: true, intervalSeconds: 900 },
    { exists: true, intervalSeconds: 300 },
    { exists: false, intervalSeconds: 300 },
  ]);
  const wallStart = Date.now();
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(segmentRefreshWorkflow, { taskQueue, workflowId: workflowIds.segment(segmentId), args: [{ segmentId }] }),
  );
  expect(refreshSegment.mock.calls).toEqual([[{ segmentId }], [{ segmentId }], [{ segmentId }], [{ segmentId }]]);
  expect(gapsInSeconds(at)).toEqual([900, 900, 300]);
  expect(Date.now() - wallStart).toBeLessThan(15_000);
});

test('a refresh that fails is tried again after 5 s, and the rounds go on', async () => {
  const segmentId = uid('segment');
  const { at, activities } = refreshes([
    new Error('canceling statement due to statement timeout'),
    { exists: true, intervalSeconds: 900 },
    { exists: false, intervalSeconds: 900 },
  ]);
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(segmentRefreshWorkflow, { taskQueue, workflowId: workflowIds.segment(segmentId), args: [{ segmentId }] }),
  );
  expect(gapsInSeconds(at)).toEqual([5, 900]);
});

test('continues as new after 200 rounds, so a segment refreshed for months keeps a short history', async () => {
  const segmentId = uid('segment');
  let rounds = 0;
  const refreshSegment = async () => ({ exists: ++rounds <= 200, intervalSeconds: 900 });
  const handle = await withWorkers(t.env, { refreshSegment }, async (taskQueue) => {
    const h = await t.env.client.workflow.start(segmentRefreshWorkflow, { taskQueue, workflowId: workflowIds.segment(segmentId), args: [{ segmentId }] });
    await h.result();
    return h;
  });
  expect(rounds).toBe(201);
  const runs = await runsOf(handle);
  expect(runs.map((r) => r.events.filter((e) => e.activityTaskScheduledEventAttributes).length)).toEqual([200, 1]);
  expect(runs[0].events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
});
