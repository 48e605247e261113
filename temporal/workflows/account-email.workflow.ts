import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { AccountEmail } from '../../src/modules/accounts';

const { sendAccountEmail } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '10 minutes', maximumAttempts: 50 },
});

/** `account-email:<id>`: one verification, password-reset or invitation mail, retried while SMTP refuses it. */
export async function accountEmailWorkflow(input: AccountEmail): Promise<void> {
  await sendAccountEmail(input);
}
