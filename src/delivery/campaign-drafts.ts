import type { EntityManager } from '@mikro-orm/postgresql';
import { type ProjectSettings, projectSettings } from '../modules/accounts';
import { draftCampaigns, draftContacts, topicsLeft } from './delivery.queries';
import type { Draft, QueuedEmail } from './queued-email';

/**
 * Campaign mail is stored unrendered: each recipient's message is rendered as it is sent, with their
 * data as it is when the batch is claimed, where it is encoded (on a delivery thread, so the rendering
 * and its garbage stay off this one). A MARKETING recipient who unsubscribed, or left the campaign's
 * topic, since the audience was fixed is skipped. An A/B test's email is rendered from its variant's
 * subject and body where the variant gives them.
 */
export async function campaignDrafts(em: EntityManager, batch: QueuedEmail[]): Promise<{ draft: (e: QueuedEmail) => Draft | undefined; skipped: Set<string> }> {
  const skipped = new Set<string>();
  const unrendered = (e: QueuedEmail) => e.html === null && !!e.campaign_id;
  // A campaign's emails are its recipients': each has a contact.
  const todo = batch.filter(unrendered);
  if (todo.length === 0) return { draft: () => undefined, skipped };
  const campaigns = new Map((await draftCampaigns(em, [...new Set(todo.map((e) => e.campaign_id!))])).map((c) => [c.id, c]));
  const contacts = new Map(
    (
      await draftContacts(
        em,
        todo.map((e) => e.contact_id!),
      )
    ).map((c) => [c.id, c]),
  );
  const settings = new Map<string, ProjectSettings>();
  for (const projectId of new Set(todo.map((e) => e.project_id))) settings.set(projectId, await projectSettings(em, projectId));
  const topicOf = (e: QueuedEmail) => campaigns.get(e.campaign_id!)?.topic_id ?? null;
  const forTopics = todo.filter(topicOf).map((e) => ({ contactId: e.contact_id!, topicId: topicOf(e)! }));
  const left = forTopics.length ? await topicsLeft(em, forTopics) : new Set<string>();
  for (const e of todo) {
    if (campaigns.get(e.campaign_id!)?.type !== 'MARKETING') continue;
    if (contacts.get(e.contact_id!)?.subscribed === false || left.has(`${e.contact_id}:${topicOf(e)}`)) skipped.add(e.id);
  }
  const draft = (e: QueuedEmail): Draft | undefined => {
    const campaign = unrendered(e) ? campaigns.get(e.campaign_id!) : undefined;
    const contact = e.contact_id ? contacts.get(e.contact_id) : undefined;
    if (!campaign || !contact) return undefined;
    const variant = e.variant_id ? campaign.ab_test?.variants.find((v) => v.id === e.variant_id) : undefined;
    return {
      emailId: e.id,
      type: campaign.type,
      subject: variant?.subject ?? campaign.subject,
      body: variant?.bodyHtml ?? variant?.body ?? campaign.body,
      contact: { id: contact.id, email: contact.email, data: contact.data },
      headers: {},
      settings: settings.get(e.project_id)!,
      tracking: [campaign.tracking],
      topicId: campaign.topic_id,
    };
  };
  return { draft, skipped };
}
