import { importNextSuppressionSlice } from '../../src/modules/suppressions';
import type { ActivityDeps } from './deps';

export function suppressionActivities(deps: ActivityDeps) {
  return {
    /** The next slice of a CSV of addresses to suppress. */
    async importSuppressionsSlice(input: { jobId: string }): Promise<{ done: boolean }> {
      return importNextSuppressionSlice(deps.orm.em.fork(), input.jobId);
    },
  };
}
