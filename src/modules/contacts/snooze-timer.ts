import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes, workflowIds } from '../../../temporal/workflow-ids';
import { contactSnoozeWorkflow, snoozeUntilSignal } from '../../../temporal/workflows/contact-snooze';

/**
 * Arranges a contact's resubscription at `until` as a durable Temporal timer: starts
 * `contact-snooze:<contactId>`, or moves the wake-up time of the one already running.
 */
export async function scheduleSnoozeEnd(t: TemporalClient, c: { id: string; projectId: string; until: Date }): Promise<void> {
  const until = c.until.toISOString();
  await t.client.workflow.signalWithStart(contactSnoozeWorkflow, {
    workflowId: workflowIds.contactSnooze(c.id),
    taskQueue: t.taskQueue,
    args: [{ contactId: c.id, until }],
    signal: snoozeUntilSignal,
    signalArgs: [until],
    typedSearchAttributes: [
      { key: searchAttributes.ProjectId, value: c.projectId },
      { key: searchAttributes.ContactId, value: c.id },
    ],
  });
}
