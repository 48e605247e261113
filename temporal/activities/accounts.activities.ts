import { type AccountEmail, sendAccountEmail } from '../../src/modules/accounts';
import type { ActivityDeps } from './deps';

export function accountActivities(deps: ActivityDeps) {
  return {
    /** A verification or password-reset mail with a fresh token, or an invitation; fails (to be retried) until SMTP accepts it. */
    async sendAccountEmail(input: AccountEmail): Promise<{ sent: boolean }> {
      return sendAccountEmail(deps.orm.em.fork(), deps.accountMail, input);
    },
  };
}
