import { workflowIds } from '../../temporal/workflow-ids';
import { domainVerificationWorkflow } from '../../temporal/workflows';
import { HOUR, type MockActivities, gapsInSeconds, runsOf, scripted, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

type Check = Awaited<ReturnType<NonNullable<MockActivities['checkDomain']>>>;

/** A checkDomain that answers `answers` in order (the last one again and again), recording when it ran. */
function checks(answers: Array<Check | Error>) {
  const { at, activity: checkDomain } = scripted<[{ domainId: string }], Check>(answers);
  return { at, activities: { checkDomain } satisfies MockActivities, checkDomain };
}

test('checks at once, then every interval the last check answered, verified or not, and ends when the domain is gone', async () => {
  const domainId = uid('domain');
  const { at, activities, checkDomain } = checks([
    { exists: true, status: 'PENDING', intervalSeconds: 3600 },
    // DOMAIN_CHECK_INTERVAL_SECONDS changed: the next round follows the new interval.
    { exists: true, status: 'VERIFIED', intervalSeconds: 7200 },
    // Verified domains are still checked: records can be removed later.
    { exists: true, status: 'VERIFIED', intervalSeconds: 7200 },
    { exists: false, intervalSeconds: 7200 },
  ]);
  const wallStart = Date.now();
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(domainVerificationWorkflow, { taskQueue, workflowId: workflowIds.domainVerification(domainId), args: [{ domainId }] }),
  );
  expect(checkDomain.mock.calls).toEqual([[{ domainId }], [{ domainId }], [{ domainId }], [{ domainId }]]);
  expect(gapsInSeconds(at)).toEqual([3600, 7200, 7200]);
  expect(Date.now() - wallStart).toBeLessThan(15_000);
});

test('a check that fails (DNS or database trouble) is tried again after 5 s, and the rounds go on', async () => {
  const domainId = uid('domain');
  const { at, activities } = checks([
    new Error('SERVFAIL'),
    { exists: true, status: 'PENDING', intervalSeconds: 600 },
    { exists: false, intervalSeconds: 600 },
  ]);
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(domainVerificationWorkflow, { taskQueue, workflowId: workflowIds.domainVerification(domainId), args: [{ domainId }] }),
  );
  expect(gapsInSeconds(at)).toEqual([5, 600]);
});

test('continues as new after 200 rounds, so a domain checked for months keeps a short history', async () => {
  const domainId = uid('domain');
  let rounds = 0;
  const checkDomain = async () => ({ exists: ++rounds <= 200, status: 'VERIFIED', intervalSeconds: HOUR / 1000 });
  const handle = await withWorkers(t.env, { checkDomain }, async (taskQueue) => {
    const h = await t.env.client.workflow.start(domainVerificationWorkflow, {
      taskQueue,
      workflowId: workflowIds.domainVerification(domainId),
      args: [{ domainId }],
    });
    await h.result();
    return h;
  });
  expect(rounds).toBe(201);
  const runs = await runsOf(handle);
  expect(runs.map((r) => r.events.filter((e) => e.activityTaskScheduledEventAttributes).length)).toEqual([200, 1]);
  expect(runs[0].events.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
});
