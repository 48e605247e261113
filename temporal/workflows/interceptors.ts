/**
 * Workflow interceptors, bundled with the workflows (scripts/bundle-workflows.ts): they report how
 * each run ends to the worker's metrics through a sink, so the sandbox never touches the registry.
 */
import { ContinueAsNew, isCancellation, proxySinks, type Sinks, TemporalFailure, type WorkflowInterceptorsFactory } from '@temporalio/workflow';

export type WorkflowOutcome = 'completed' | 'failed' | 'cancelled' | 'continued_as_new' | 'task_failed';

export interface MetricsSinks extends Sinks {
  metrics: { runEnded(outcome: WorkflowOutcome): void };
}

const { metrics } = proxySinks<MetricsSinks>();

function outcomeOf(err: unknown): WorkflowOutcome {
  if (err instanceof ContinueAsNew) return 'continued_as_new';
  if (isCancellation(err)) return 'cancelled';
  // Only a TemporalFailure fails the execution; any other error fails the task, which Temporal retries.
  return err instanceof TemporalFailure ? 'failed' : 'task_failed';
}

export const interceptors: WorkflowInterceptorsFactory = () => ({
  inbound: [
    {
      async execute(input, next) {
        try {
          const result = await next(input);
          metrics.runEnded('completed');
          return result;
        } catch (err) {
          metrics.runEnded(outcomeOf(err));
          throw err;
        }
      },
    },
  ],
});
