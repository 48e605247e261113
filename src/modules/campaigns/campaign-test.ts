import { assertWithinBillingLimits } from '../billing';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import type { Links } from '../../mail/links';
import { upsertContact } from '../contacts';
import { composeMessage } from '../../mail/compose';
import { queueEmail } from '../emails';
import { sendingContext } from '../emails';
import type { Campaign } from './campaigns.entity';
import { sendableBody } from '../templates';
import { transaction } from '../../db/orm';

/**
 * A test of a campaign to one address, rendered as that address's contact would receive it, marked
 * `[Test]`, and queued like any transactional email: it never counts in the campaign's statistics.
 */
export async function queueTestSend(em: EntityManager, c: Campaign, email: string, links: Links) {
  const { settings, limits } = await sendingContext(em, c.projectId, c.fromEmail);
  return transaction(em, async (tx) => {
    await assertWithinBillingLimits(tx, c.projectId, 1, limits);
    const upsert = await upsertContact(tx, c.projectId, { email, defaultSubscribed: false, data: { set: {}, unset: [] } });
    const emailId = newId();
    const message = composeMessage({
      emailId,
      type: c.type,
      subject: `[Test] ${c.subject}`,
      body: sendableBody(c),
      contact: { id: upsert.contact.id, email: upsert.contact.email, data: upsert.contact.data },
      headers: {},
      settings,
      tracking: [c.tracking],
      topicId: c.topicId,
      links,
    });
    await queueEmail(tx, {
      id: emailId,
      projectId: c.projectId,
      contactId: upsert.contact.id,
      templateId: null,
      type: c.type,
      from: { email: c.fromEmail, name: c.fromName },
      replyTo: c.replyTo ?? c.fromEmail,
      to: { email, name: null },
      message,
    });
    return { emailId, contactId: upsert.contact.id, events: upsert.events };
  });
}
