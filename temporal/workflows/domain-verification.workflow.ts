import { continueAsNew, proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { checkDomain } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes' },
});

/** Rounds per run before continuing as new (about 6 history events a round). */
const ROUNDS_PER_RUN = 200;

/**
 * `domain-verification:<domainId>`: checks the domain's DNS records now and then every interval
 * (DOMAIN_CHECK_INTERVAL_SECONDS, read by the activity so a change applies at the next round), and
 * ends when the domain is deleted.
 */
export async function domainVerificationWorkflow(input: { domainId: string }): Promise<void> {
  for (let round = 0; round < ROUNDS_PER_RUN; round++) {
    const result = await checkDomain({ domainId: input.domainId });
    if (!result.exists) return;
    await sleep(result.intervalSeconds * 1000);
  }
  await continueAsNew<typeof domainVerificationWorkflow>(input);
}
