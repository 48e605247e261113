import { assertWithinBillingLimits } from '../billing';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import type { Links } from '../../mail/links';
import { upsertContact } from '../contacts';
import { composeMessage } from '../../mail/compose';
import { queueEmail } from '../emails';
import { sendingContext } from '../emails';
import type { CampaignRow } from './campaigns.service';
import { transaction } from '../../db/orm';

/**
 * A test of a campaign to one address, rendered as that address's contact would receive it, marked
 * `[Test]`, and queued like any transactional email: it never counts in the campaign's statistics.
 */
export async function queueTestSend(em: EntityManager, c: CampaignRow, email: string, links: Links) {
  const { settings, limits } = await sendingContext(em, c.project_id, c.from_email);
  return transaction(em, async (tx) => {
    await assertWithinBillingLimits(tx, c.project_id, 1, limits);
    const upsert = await upsertContact(tx, c.project_id, { email, defaultSubscribed: false, data: { set: {}, unset: [] } });
    const emailId = newId();
    const message = composeMessage({
      emailId,
      type: c.type,
      subject: `[Test] ${c.subject}`,
      body: c.body,
      contact: { id: upsert.contact.id, email: upsert.contact.email, data: upsert.contact.data },
      headers: {},
      settings,
      tracking: [c.tracking],
      links,
    });
    await queueEmail(tx, {
      id: emailId,
      projectId: c.project_id,
      contactId: upsert.contact.id,
      templateId: null,
      type: c.type,
      from: { email: c.from_email, name: c.from_name },
      replyTo: c.reply_to ?? c.from_email,
      to: { email, name: null },
      message,
    });
    return { emailId, contactId: upsert.contact.id, events: upsert.events };
  });
}
