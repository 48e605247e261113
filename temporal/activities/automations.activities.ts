import { ApplicationFailure, Context } from '@temporalio/activity';
import type { WaitEnd } from '../../src/modules/automations';
import { type ActivityDeps, drainWindow } from './deps';

/** An automation execution's steps, and the outbox drain that starts and wakes executions. */
export function automationActivities(deps: ActivityDeps) {
  return {
    async automationLoad(input: { executionId: string; recordTrigger: boolean }) {
      return deps.automation.load(input.executionId, input.recordTrigger);
    },

    async automationRunStep(input: { executionId: string; stepId: string; seq: number; closed?: WaitEnd; last?: boolean }) {
      return deps.automation.runStep(input.executionId, input.stepId, input.seq, input);
    },

    async automationBeginWait(input: { executionId: string; stepId: string; seq: number; eventName?: string; closed?: WaitEnd }) {
      return deps.automation.beginWait(input.executionId, input.stepId, input.seq, input.eventName, input.closed);
    },

    async automationFinish(input: { executionId: string; status: 'COMPLETED' | 'EXITED' | 'FAILED' | 'CANCELLED'; error?: string; closed?: WaitEnd }) {
      return deps.automation.finish(input.executionId, input.status, input.error, input.closed);
    },

    /** Refusals (a private address, a 4xx) are final; timeouts, 5xx and network errors are retried. */
    async automationWebhook(input: { executionId: string; stepId: string; seq: number; closed?: WaitEnd }) {
      try {
        return await deps.automation.webhook(input.executionId, input.stepId, input.seq, Context.current().info.attempt, input.closed);
      } catch (err) {
        if ((err as { retryable?: boolean }).retryable === false) throw ApplicationFailure.nonRetryable((err as Error).message, 'WebhookRefused');
        throw err;
      }
    },

    /** Starts executions and wakes waiting ones from the automation outbox until it has been empty a while. */
    async drainAutomationOutbox() {
      return deps.automationDispatcher.drain(drainWindow(deps));
    },
  };
}
