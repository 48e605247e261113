import { Context } from '@temporalio/activity';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, RetryState } from '@temporalio/common';
import { workflowIds } from '../../temporal/workflow-ids';
import { accountEmailWorkflow } from '../../temporal/workflows';
import type { AccountEmail } from '../../src/modules/accounts';
import { type MockActivities, scheduledAt, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

const mail: AccountEmail = { userId: '7b0c7d0e-6f1a-4a0e-9d8e-2f6f1a0b9c11', purpose: 'verify_email' };

test('sends the mail once when SMTP takes it', async () => {
  const sendAccountEmail = jest.fn(async () => ({ sent: true }));
  await withWorkers(t.env, { sendAccountEmail } satisfies MockActivities, (taskQueue) =>
    t.env.client.workflow.execute(accountEmailWorkflow, { taskQueue, workflowId: workflowIds.accountEmail(uid('mail')), args: [mail] }),
  );
  expect(sendAccountEmail).toHaveBeenCalledTimes(1);
  expect(sendAccountEmail).toHaveBeenCalledWith(mail);
});

test('while SMTP refuses, it is tried again with backoff from 5 s (in skipped time), then sent', async () => {
  const attempts: number[] = [];
  const sendAccountEmail = jest.fn(async () => {
    attempts.push(scheduledAt());
    if (attempts.length <= 3) throw new Error('421 try again later');
    return { sent: true };
  });
  const wallStart = Date.now();
  await withWorkers(t.env, { sendAccountEmail }, (taskQueue) =>
    t.env.client.workflow.execute(accountEmailWorkflow, { taskQueue, workflowId: workflowIds.accountEmail(uid('mail')), args: [mail] }),
  );
  expect(sendAccountEmail).toHaveBeenCalledTimes(4);
  const gaps = attempts.slice(1).map((at, i) => Math.round((at - attempts[i]) / 1000));
  expect(gaps).toEqual([5, 10, 20]);
  expect(Date.now() - wallStart).toBeLessThan(15_000);
});

test('it gives up after 50 attempts, and the workflow fails', async () => {
  const sendAccountEmail = jest.fn(async () => {
    throw ApplicationFailure.create({ message: `refused, attempt ${Context.current().info.attempt}` });
  });
  const failed = await withWorkers(t.env, { sendAccountEmail }, (taskQueue) =>
    t.env.client.workflow.execute(accountEmailWorkflow, { taskQueue, workflowId: workflowIds.accountEmail(uid('mail')), args: [mail] }).catch((err) => err),
  );
  expect(failed).toBeInstanceOf(WorkflowFailedError);
  expect(failed.cause).toBeInstanceOf(ActivityFailure);
  expect(failed.cause.retryState).toBe(RetryState.MAXIMUM_ATTEMPTS_REACHED);
  expect(failed.cause.cause.message).toBe('refused, attempt 50');
  expect(sendAccountEmail).toHaveBeenCalledTimes(50);
});
