import { condition, continueAsNew, defineSignal, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';

/** A later snooze of the same contact moves the wake-up time of the running execution. */
export const snoozeUntilSignal = defineSignal<[string]>('snoozeUntil');

const { endContactSnooze } = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

export interface ContactSnoozeInput {
  contactId: string;
  until: string;
}

/**
 * `contact-snooze:<contactId>`: sleeps durably until the snooze ends, then resubscribes the contact
 * if it still carries that snooze. A restart of the service, or a snooze ending while it was down,
 * changes nothing: the timer is Temporal's, and it fires when the worker is back.
 */
export async function contactSnoozeWorkflow(input: ContactSnoozeInput): Promise<void> {
  let until = input.until;
  setHandler(snoozeUntilSignal, (next) => {
    until = next;
  });
  for (;;) {
    // Each new snooze adds a few events: a contact snoozed again and again continues as new.
    if (workflowInfo().historyLength > 5000) await continueAsNew<typeof contactSnoozeWorkflow>({ contactId: input.contactId, until });
    const target = until;
    const wait = Date.parse(target) - Date.now();
    if (wait > 0 && (await condition(() => until !== target, wait))) continue;
    await endContactSnooze({ contactId: input.contactId, until: target });
    if (until === target) return;
  }
}
