import { checkDomain } from '../../src/modules/domains';
import type { ActivityDeps } from './deps';

export function domainActivities(deps: ActivityDeps) {
  return {
    /** Checks a sender domain's DNS records and stores the outcome; `exists: false` once it was deleted. */
    async checkDomain(input: { domainId: string }): Promise<{ exists: boolean; status?: string; intervalSeconds: number }> {
      const row = await checkDomain(deps.orm.em.fork(), deps.resolver, input.domainId, deps.returnPath);
      return { exists: !!row, status: row?.status, intervalSeconds: deps.domainCheckIntervalSeconds };
    },
  };
}
