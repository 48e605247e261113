import { endSnooze, importNextSlice, runBulkJobChunk } from '../../src/modules/contacts';
import { requestConfirmation } from '../../src/modules/consent';
import type { ActivityDeps } from './deps';

/** Contacts: snooze ends, bulk jobs and CSV imports; what changed is told to live segments and automations. */
export function contactActivities(deps: ActivityDeps) {
  /**
   * Double opt-in mail for the joins a committed chunk left pending. A retry goes on with the next chunk,
   * so each pending join is mailed at most once (one whose mail failed stays pending and expires).
   */
  const mailConfirmations = async (projectId: string | undefined, pending: Map<string, string[]>, source: 'import' | 'bulk') => {
    for (const [contactId, topicIds] of pending) {
      await requestConfirmation(deps.orm.em.fork(), deps.consent, {
        projectId: projectId!,
        contactId,
        topicIds,
        subscribeAll: false,
        source,
        origin: { ip: null, userAgent: null },
      });
    }
  };
  return {
    /** Resubscribes the contact if it still carries exactly this snooze; otherwise does nothing. */
    async endContactSnooze(input: { contactId: string; until: string }): Promise<{ resubscribed: boolean }> {
      const ended = await endSnooze(deps.orm.em.fork(), input.contactId, new Date(input.until));
      if (ended) deps.hub.publish({ projectId: ended.projectId, contactIds: [input.contactId], events: ended.events });
      return { resubscribed: !!ended?.events.length };
    },

    /** One chunk of a bulk job; what changed is told to live segments and automations. */
    async runBulkJobChunk(input: { jobId: string }): Promise<{ done: boolean }> {
      const r = await runBulkJobChunk(deps.orm.em.fork(), input.jobId);
      if (r.projectId) deps.hub.publish({ projectId: r.projectId, contactIds: r.contactIds, events: r.events });
      await mailConfirmations(r.projectId, r.pending, 'bulk');
      return { done: r.done };
    },

    /** The next slice of a CSV import; the contacts it wrote, and the topics they joined, are told to live segments and automations. */
    async importContactsSlice(input: { jobId: string }): Promise<{ done: boolean }> {
      const r = await importNextSlice(deps.orm.em.fork(), input.jobId);
      if (r.projectId && r.contactIds.length) deps.hub.publish({ projectId: r.projectId, contactIds: r.contactIds, events: r.events });
      await mailConfirmations(r.projectId, r.pending, 'import');
      return { done: r.done };
    },
  };
}
