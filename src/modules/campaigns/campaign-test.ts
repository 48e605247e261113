import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import type { Links } from '../../mail/links';
import { projectSettings } from '../accounts/project-settings';
import { upsertContact } from '../contacts/contacts.service';
import { assertVerifiedSender } from '../domains/domains.service';
import { composeMessage, EMAIL_QUEUED_CHANNEL } from '../emails/emails.service';
import type { CampaignRow } from './campaigns.service';

/**
 * A test of a campaign to one address, rendered as that address's contact would receive it, marked
 * `[Test]`, and queued like any transactional email: it never counts in the campaign's statistics.
 */
export async function queueTestSend(em: EntityManager, c: CampaignRow, email: string, links: Links) {
  await assertVerifiedSender(em, c.project_id, c.from_email);
  const settings = await projectSettings(em, c.project_id);
  return em.transactional(async (tx) => {
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
      links,
    });
    const domain = c.from_email.slice(c.from_email.lastIndexOf('@') + 1);
    await sql(
      tx,
      `INSERT INTO emails (id, project_id, contact_id, type, from_email, from_name, reply_to, to_email, subject, html, text, headers, message_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?)`,
      [emailId, c.project_id, upsert.contact.id, c.type, c.from_email, c.from_name, c.reply_to ?? c.from_email, email, message.subject, message.html, message.text, JSON.stringify(message.headers), `<${emailId}@${domain}>`],
    );
    await sql(tx, `SELECT pg_notify(?, ?)`, [EMAIL_QUEUED_CHANNEL, c.project_id]);
    return { emailId, contactId: upsert.contact.id, events: upsert.events };
  });
}
