import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { sendAccountEmail } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '10 minutes', maximumAttempts: 50 },
});

/** `account-email:<id>`: one verification or password-reset mail, retried while SMTP refuses it. */
export async function accountEmailWorkflow(input: { userId: string; purpose: 'verify_email' | 'reset_password' }): Promise<void> {
  await sendAccountEmail(input);
}
