import { assertWithinBillingLimits } from '../billing';
import type { EntityManager } from '@mikro-orm/postgresql';
import { type KeyLimit, takeKeyed } from '../../db/rate-limiter';
import { newId } from '../../db/ids';
import { AppError } from '../../errors';
import type { Links } from '../../mail/links';
import { Contact } from '../contacts';
import { composeMessage } from '../../mail/compose';
import { RenderDeadline, TEMPLATE_LIMITS } from '../../mail/liquid';
import { queueEmail, recordSuppressedEmail } from '../emails';
import { sendingContext } from '../emails';
import type { Campaign } from './campaigns.entity';
import { contactToRender, sendableBody, templateErrorResponse } from '../templates';
import { transaction } from '../../db/orm';

/** The id links are signed for in a test to an address that is no contact (they lead to no contact's page). */
const NO_CONTACT = '00000000-0000-0000-0000-000000000000';

/** Test-send requests a project may make, each to at most 50 addresses: an author's checks, not a way round a campaign. */
export const TEST_SEND_LIMIT: KeyLimit = { limit: 10, windowSeconds: 60 };

/**
 * Tests of a campaign, one message to each address, rendered for `contactId`'s data, else for the
 * address's own contact, else for no data; marked `[Test]` and queued like any transactional email:
 * they never count in the campaign's statistics, and the campaign stays as it is. An address that is
 * no contact of the project stays none: its email has no contact, and what happens to it (sent, opened,
 * bounced) moves the email's status only, never a contact's events or subscription.
 */
export async function queueTestSends(em: EntityManager, c: Campaign, input: { emails: string[]; contactId?: string }, links: Links) {
  const decision = await takeKeyed(em, c.projectId, 'campaign-test', TEST_SEND_LIMIT);
  if (!decision.allowed) {
    throw new AppError(429, 'RATE_LIMIT_EXCEEDED', `At most ${decision.limit} test sends a minute per project`, {
      headers: { 'Retry-After': String(decision.resetSeconds) },
      details: { limit: decision.limit, retryAfterSeconds: decision.resetSeconds },
    });
  }
  const rendered = input.contactId ? await contactToRender(em, c.projectId, input.contactId) : undefined;
  const emails = [...new Set(input.emails)];
  const { settings, limits, suppressed } = await sendingContext(em, c.projectId, c.fromEmail, emails);
  const deadline = new RenderDeadline(TEMPLATE_LIMITS.requestRenderMs);
  return transaction(em, async (tx) => {
    await assertWithinBillingLimits(tx, c.projectId, emails.length - suppressed.size, limits);
    const sent: Array<{ email: string; to: string; status: 'QUEUED' | 'SUPPRESSED' }> = [];
    for (const to of emails) {
      const own = await tx.findOne(Contact, { projectId: c.projectId, email: to });
      const forContact = rendered ?? (own ? { id: own.id, email: own.email, data: own.data } : { id: NO_CONTACT, email: to, data: {} });
      const emailId = newId();
      let message: ReturnType<typeof composeMessage>;
      try {
        message = composeMessage({
          emailId,
          type: c.type,
          subject: `[Test] ${c.subject}`,
          body: sendableBody(c),
          contact: forContact,
          headers: {},
          settings,
          tracking: [c.tracking],
          topicId: c.topicId,
          links,
          deadline,
        });
      } catch (err) {
        return templateErrorResponse(err);
      }
      const email = {
        id: emailId,
        projectId: c.projectId,
        contactId: own?.id ?? null,
        templateId: null,
        type: c.type,
        from: { email: c.fromEmail, name: c.fromName },
        replyTo: c.replyTo ?? c.fromEmail,
        to: { email: to, name: null },
        message,
      };
      // A suppressed address gets no test either: its email is recorded SUPPRESSED, never sent.
      const why = suppressed.get(to);
      if (why) await recordSuppressedEmail(tx, email, why);
      else await queueEmail(tx, email);
      sent.push({ email: emailId, to, status: why ? 'SUPPRESSED' : 'QUEUED' });
    }
    return sent;
  });
}
