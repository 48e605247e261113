/**
 * One recipient's message from a body and subject with placeholders: pure string work, so a delivery
 * thread can do it for campaign mail as well as the request path for /v1/send.
 */
import type { Links } from './links';
import type { OutgoingMessage } from './mime';
import { inField, placeholdersOnly, type RenderDeadline, renderTemplate } from './liquid';
import { templateVariables } from './render';
import { htmlToText, htmlToTextTemplate } from './text';
import { addTracking, insertBeforeBodyEnd, unsubscribeFooter } from './tracking';

/** A project's settings for how its mail is sent, as far as composing a message needs them. */
export interface MailSettings {
  tracking: 'all' | 'marketing' | 'off';
  trackOpens: boolean;
  trackClicks: boolean;
  unsubscribeFooter: boolean;
}

/** Open and click tracking switched on or off at one level (send, template or campaign); absent: the level above decides. */
export interface TrackingOverride {
  opens?: boolean;
  clicks?: boolean;
}

/** What a message gets: each switch from the most specific level that sets it, else the project's. */
export function effectiveTracking(
  settings: MailSettings,
  marketing: boolean,
  ...overrides: Array<TrackingOverride | null | undefined>
): { opens: boolean; clicks: boolean } {
  const scoped = settings.tracking === 'all' || (settings.tracking === 'marketing' && marketing);
  const pick = (key: 'opens' | 'clicks', project: boolean) => overrides.find((o) => o?.[key] !== undefined)?.[key] ?? (scoped && project);
  return { opens: pick('opens', settings.trackOpens), clicks: pick('clicks', settings.trackClicks) };
}

/** One recipient's message as it is queued; `html` is null only for a text-only submitted message. */
export interface ComposedMessage {
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
}

export interface ComposeInput {
  emailId: string;
  type: 'TRANSACTIONAL' | 'MARKETING' | 'HEADLESS';
  subject: string;
  body: string;
  contact: { id: string; email: string; data: Record<string, unknown> };
  values?: Record<string, unknown>;
  headers: Record<string, string>;
  settings: MailSettings;
  /** Tracking switches of the send, then of the template or campaign (the first that sets one wins). */
  tracking?: Array<TrackingOverride | null | undefined>;
  /** The topic MARKETING mail is sent for: its unsubscribe link and one-click header leave only that topic. */
  topicId?: string | null;
  links: Links;
  /** A render time limit shared with the other recipients of the same request. */
  deadline?: RenderDeadline;
}

/**
 * The text part. A body of old-syntax placeholders has a text template (converted once) rendered with
 * the recipient's data, which costs less than converting each rendered HTML. A body with Liquid logic is
 * rendered once, as HTML, and that is converted: a second render of its loops would cost more than the
 * conversion, and `| raw` HTML becomes text rather than markup.
 */
function textPart(c: ComposeInput, footer: boolean, vars: Record<string, unknown>, html: string): string | null {
  if (placeholdersOnly(c.body, 'html')) {
    const textTemplate = htmlToTextTemplate(footer ? insertBeforeBodyEnd(c.body, unsubscribeFooter('{{unsubscribeUrl}}', '{{manageUrl}}')) : c.body);
    return textTemplate ? renderTemplate(textTemplate, vars, 'text', c.deadline).trim() || null : null;
  }
  return htmlToText(html) ?? null;
}

/**
 * One recipient's message: Liquid rendered with their data, the unsubscribe footer and
 * `List-Unsubscribe` pair on MARKETING mail, a text part, then tracking.
 */
export function composeMessage(c: ComposeInput): ComposedMessage & { html: string } {
  const contactLinks = c.links.contactLinks(c.contact.id, c.type === 'MARKETING' ? c.topicId : null);
  const vars = templateVariables({ contact: c.contact, values: c.values, links: contactLinks });
  const marketing = c.type === 'MARKETING';
  const footer = marketing && c.settings.unsubscribeFooter;
  // The subject first: a template that fails fails before the larger body is rendered.
  const subject = inField('subject', () => renderTemplate(c.subject, vars, 'text', c.deadline));
  let html = inField('body', () => renderTemplate(c.body, vars, 'html', c.deadline));
  if (footer) html = insertBeforeBodyEnd(html, unsubscribeFooter(contactLinks.unsubscribeUrl, contactLinks.manageUrl));
  const rendered = html;
  const text = inField('body', () => textPart(c, footer, vars, rendered));
  html = addTracking(html, c.emailId, c.links, effectiveTracking(c.settings, marketing, ...(c.tracking ?? [])));
  const headers = { ...c.headers };
  const callerUnsubscribe = Object.keys(headers).some((h) => h.toLowerCase() === 'list-unsubscribe');
  if (marketing) {
    // RFC 8058 one-click: the same URL answers POST List-Unsubscribe=One-Click. A caller's own pair replaces both.
    if (!callerUnsubscribe) {
      headers['List-Unsubscribe'] = `<${contactLinks.unsubscribeUrl}>`;
      headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
    }
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'precedence')) headers.Precedence = 'bulk';
  }
  return { subject, html, text, headers };
}

/** Campaign mail handed to delivery unrendered: it is rendered for its recipient where it is encoded, off the thread that claims it. */
export interface DraftMessage extends Omit<OutgoingMessage, 'subject' | 'text' | 'html' | 'headers'> {
  compose: Omit<ComposeInput, 'links'>;
}

const isDraft = (m: OutgoingMessage | DraftMessage): m is DraftMessage => 'compose' in m;

/** A draft rendered for its recipient; a ready message as it is. */
export function finished(m: OutgoingMessage | DraftMessage, links: Links): OutgoingMessage {
  if (!isDraft(m)) return m;
  const { compose, ...rest } = m;
  return { ...rest, ...composeMessage({ ...compose, links }) };
}
