import { workflowIds } from '../../temporal/workflow-ids';
import { contactSnoozeWorkflow } from '../../temporal/workflows';
import { snoozeUntilSignal } from '../../temporal/workflows/contact-snooze.workflow';
import { DAY, type MockActivities, scheduledAt, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

/** The mocked activity, recording the snooze each call ended and when (server time) it ran. */
function endContactSnoozeMock(onCall?: (until: string) => Promise<void>) {
  const ended: Array<{ contactId: string; until: string; at: number }> = [];
  const endContactSnooze = async (input: { contactId: string; until: string }) => {
    ended.push({ ...input, at: scheduledAt() });
    await onCall?.(input.until);
    return { resubscribed: true };
  };
  return { ended, activities: { endContactSnooze } satisfies MockActivities };
}

const iso = (ms: number) => new Date(ms).toISOString();

test('sleeps durably until the snooze ends (30 days, in skipped time), then ends it once', async () => {
  const contactId = uid('contact');
  const until = iso((await t.env.currentTimeMs()) + 30 * DAY);
  const { ended, activities } = endContactSnoozeMock();
  const wallStart = Date.now();
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(contactSnoozeWorkflow, { taskQueue, workflowId: workflowIds.contactSnooze(contactId), args: [{ contactId, until }] }),
  );
  expect(ended).toEqual([{ contactId, until, at: expect.any(Number) }]);
  expect(ended[0].at).toBeGreaterThanOrEqual(Date.parse(until));
  expect(Date.now() - wallStart).toBeLessThan(15_000);
});

test('a later snooze (the snoozeUntil signal) moves the wake-up: nothing ends at the old time', async () => {
  const contactId = uid('contact');
  const now = await t.env.currentTimeMs();
  const first = iso(now + 2 * DAY);
  const later = iso(now + 5 * DAY);
  const { ended, activities } = endContactSnoozeMock();
  await withWorkers(t.env, activities, async (taskQueue) => {
    const handle = await t.env.client.workflow.start(contactSnoozeWorkflow, {
      taskQueue,
      workflowId: workflowIds.contactSnooze(contactId),
      args: [{ contactId, until: first }],
    });
    await handle.signal(snoozeUntilSignal, later);
    await t.env.sleep(3 * DAY);
    expect(ended).toEqual([]);
    await handle.result();
  });
  expect(ended.map((e) => e.until)).toEqual([later]);
  expect(ended[0].at).toBeGreaterThanOrEqual(Date.parse(later));
});

test('a snooze moved earlier ends at the earlier time', async () => {
  const contactId = uid('contact');
  const now = await t.env.currentTimeMs();
  const earlier = iso(now + DAY);
  const { ended, activities } = endContactSnoozeMock();
  await withWorkers(t.env, activities, async (taskQueue) => {
    const handle = await t.env.client.workflow.start(contactSnoozeWorkflow, {
      taskQueue,
      workflowId: workflowIds.contactSnooze(contactId),
      args: [{ contactId, until: iso(now + 30 * DAY) }],
    });
    await handle.signal(snoozeUntilSignal, earlier);
    await handle.result();
  });
  expect(ended.map((e) => e.until)).toEqual([earlier]);
  expect(ended[0].at).toBeGreaterThanOrEqual(Date.parse(earlier));
  expect(ended[0].at).toBeLessThan(Date.parse(earlier) + DAY);
});

test('a snooze already over when the workflow starts (the service was down) ends at once', async () => {
  const contactId = uid('contact');
  const now = await t.env.currentTimeMs();
  const until = iso(now - DAY);
  const { ended, activities } = endContactSnoozeMock();
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(contactSnoozeWorkflow, { taskQueue, workflowId: workflowIds.contactSnooze(contactId), args: [{ contactId, until }] }),
  );
  expect(ended.map((e) => e.until)).toEqual([until]);
  expect(ended[0].at - now).toBeLessThan(60_000);
});

test('a new snooze that arrives while the old one is being ended is ended at its own time too', async () => {
  const contactId = uid('contact');
  const workflowId = workflowIds.contactSnooze(contactId);
  const now = await t.env.currentTimeMs();
  const first = iso(now + DAY);
  const again = iso(now + 4 * DAY);
  const { ended, activities } = endContactSnoozeMock(async (until) => {
    if (until === first) await t.env.client.workflow.getHandle(workflowId).signal(snoozeUntilSignal, again);
  });
  await withWorkers(t.env, activities, (taskQueue) =>
    t.env.client.workflow.execute(contactSnoozeWorkflow, { taskQueue, workflowId, args: [{ contactId, until: first }] }),
  );
  expect(ended.map((e) => e.until)).toEqual([first, again]);
  expect(ended[1].at).toBeGreaterThanOrEqual(Date.parse(again));
});
