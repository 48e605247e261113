import type { EntityManager } from '@mikro-orm/postgresql';
import { z } from 'zod';
import { notFound } from '../../errors';
import { composeMessage, type TrackingOverride } from '../../mail/compose';
import type { Links } from '../../mail/links';
import { projectSettings } from '../accounts';
import { applyData, Contact, dataMapSchema, resolveDataMap } from '../contacts';
import { templateErrorResponse } from './template-content';

export const previewSchema = z.object({
  contactId: z.uuid().optional().meta({ description: 'A contact of the project: rendered with its data, as it would receive the mail' }),
  data: dataMapSchema.optional().meta({ description: 'Variables as /v1/send takes them, over the contact’s data when both are given' }),
});
export type PreviewInput = z.output<typeof previewSchema>;

export const previewResponse = z.object({
  subject: z.string(),
  html: z.string(),
  text: z.string().nullable().meta({ description: 'The plain-text part; null when the body has no text' }),
});

export const PREVIEW_DESCRIPTION =
  'The subject, HTML and text as the email would go out for that contact (or the given data): Liquid rendered, ' +
  'the unsubscribe footer on MARKETING mail; links as written (no tracking). Sends nothing.';

/** What a preview with no contact renders for the contact's id and address. */
const NO_CONTACT = { id: '00000000-0000-0000-0000-000000000000', email: '', data: {} };

/** A message of a template or campaign, as it would be composed for one recipient. */
export interface PreviewedMessage {
  type: 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
  subject: string;
  /** The HTML it is rendered from (an MJML body's compiled HTML). */
  body: string;
  tracking: TrackingOverride | null;
  topicId?: string | null;
}

/** The contact a preview or test send renders for: 404 when it is not the project's. */
export async function contactToRender(
  em: EntityManager,
  projectId: string,
  contactId: string,
): Promise<{ id: string; email: string; data: Record<string, unknown> }> {
  const contact = await em.findOne(Contact, { projectId, id: contactId });
  if (!contact) throw notFound('Contact');
  return { id: contact.id, email: contact.email, data: contact.data };
}

/**
 * The subject, HTML and text a recipient would get: Liquid rendered with the contact's data (and the
 * given data, as /v1/send merges it), the unsubscribe footer on MARKETING mail. No email exists, so
 * links are left as written: no click redirects, no open pixel.
 */
export async function previewMessage(em: EntityManager, projectId: string, m: PreviewedMessage, input: PreviewInput, links: Links) {
  const contact = input.contactId ? await contactToRender(em, projectId, input.contactId) : NO_CONTACT;
  const settings = await projectSettings(em, projectId);
  const resolved = resolveDataMap(input.data);
  try {
    const message = composeMessage({
      emailId: NO_CONTACT.id,
      type: m.type,
      subject: m.subject,
      body: m.body,
      contact: { ...contact, data: applyData(contact.data, resolved) },
      values: resolved.values,
      headers: {},
      settings,
      tracking: [{ opens: false, clicks: false }],
      topicId: m.topicId ?? null,
      links,
    });
    return { subject: message.subject, html: message.html, text: message.text };
  } catch (err) {
    return templateErrorResponse(err);
  }
}
