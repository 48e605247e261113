import { Context } from '@temporalio/activity';
import { type ActivityDeps, drainWindow } from './deps';

export function emailQueueActivities(deps: ActivityDeps) {
  return {
    /** Delivers queued email until the queue has been idle a while; fails (to be retried) while SMTP is unreachable. */
    async drainEmailQueue() {
      const { info } = Context.current();
      return deps.dispatcher.drain({ ...drainWindow(deps), owner: info.workflowExecution?.workflowId ?? info.activityId });
    },
  };
}
