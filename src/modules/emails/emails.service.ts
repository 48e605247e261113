import { assertWithinBillingLimits } from '../billing/billing.service';
import type { EntityManager } from '@mikro-orm/postgresql';
import addressparser from 'nodemailer/lib/addressparser';
import { newId } from '../../db/ids';
import { insideTransaction, sql, sqlTransaction } from '../../db/orm';
import { AppError, badRequest } from '../../http/errors';
import { type IdempotencyClaim, markIdempotentSuccess } from '../../http/idempotency';
import type { Links } from '../../mail/links';
import { ADDRESS_SHAPE } from '../../mail/mime';
import { htmlToText } from '../../mail/text';
import { addTracking } from '../../mail/tracking';
import { type ComposedMessage, type ComposeInput, composeMessage, effectiveTracking } from '../../mail/compose';
import { resolveDataMap } from '../contacts/data-map';
import { upsertContact } from '../contacts/contacts.service';
import type { EventRecord } from '../events/events.store';
import { getTemplate, type TemplateRow } from '../templates/templates.service';
import type { AttachmentInput, SendInput } from './emails.schemas';
import { sendingContext } from './sending-context';

export type EmailType = TemplateRow['type'];

/** Dispatchers LISTEN here; sent by the statement that queues mail, so they wake when its transaction commits. */
export const EMAIL_QUEUED_CHANNEL = 'postbox_email_queued';

export interface SendLimits {
  attachmentsMaxBytes: number;
  messageMaxBytes: number;
}

/** The email queue of this process's own worker (its `QueueSignal`), when it runs one. */
export interface LocalEmailQueue {
  readonly draining: boolean;
  queuedHere(): void;
}

/**
 * A message its sender composed whole (SMTP submission): subject, HTML and text used exactly as written,
 * no placeholders rendered; only tracking is added. Without HTML it stays text only; without text, the
 * text part is converted from the HTML.
 */
export interface LiteralContent {
  subject: string;
  html: string | null;
  text: string | null;
}

/** An attachment as /v1/send gives it (base64) or a submitted message carries it (its bytes, already decoded). */
type SendAttachment = Omit<AttachmentInput, 'content'> & { content: string | Buffer };

/** What /v1/send takes, or a submitted message's own content in place of `subject` and `body`. */
export type SendRequest = Omit<SendInput, 'attachments'> & { attachments?: SendAttachment[]; literal?: LiteralContent };

export interface SendResult {
  emails: Array<{ contact: { id: string; email: string }; email: string }>;
  timestamp: string;
  /** Events written along the way (subscription changes), for whoever reacts to events. */
  events: EventRecord[];
}

function tooBig(field: string, message: string): AppError {
  return new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: [{ field, message, code: 'too_big' }],
  });
}

function missing(field: string, message: string): AppError {
  return new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: [{ field, message, code: 'invalid_type' }],
  });
}

/** `from` as a string (possibly `Name <addr>`) or an object; the deprecated `name` fills in a missing name. */
function resolveSender(input: SendRequest, template?: TemplateRow): { email: string; name: string | null } {
  if (input.from === undefined) {
    if (!template) throw missing('from', 'from is required without a template that has one');
    return { email: template.from_email, name: input.name ?? template.from_name };
  }
  if (typeof input.from === 'object') return { email: input.from.email, name: input.from.name ?? null };
  const [parsed] = addressparser(input.from, { flatten: true });
  const email = parsed?.address?.trim().toLowerCase();
  if (!email || !ADDRESS_SHAPE.test(email)) {
    throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
      errors: [{ field: 'from', message: 'from must be an email address, optionally with a name: "Name <a@b.c>"', code: 'invalid_string' }],
    });
  }
  return { email, name: parsed.name || input.name || null };
}

function recipients(to: SendInput['to']): Array<{ email: string; name: string | null }> {
  const list = (Array.isArray(to) ? to : [to]).map((r) => (typeof r === 'string' ? { email: r, name: null } : { email: r.email, name: r.name ?? null }));
  // The same address twice in one request gets one email.
  const seen = new Set<string>();
  return list.filter((r) => !seen.has(r.email) && seen.add(r.email));
}

/** Base64 without its whitespace, stripped once: the size check measures it and the send decodes it. */
const stripped = (attachments: SendAttachment[]): SendAttachment[] =>
  attachments.map((a) => (typeof a.content === 'string' ? { ...a, content: a.content.replace(/\s+/g, '') } : a));

/** Each attachment's bytes, decoded once for all the recipients that get it. */
const decoded = (attachments: SendAttachment[]) =>
  attachments.map((a) => ({ ...a, content: typeof a.content === 'string' ? Buffer.from(a.content, 'base64') : a.content }));

const decodedSize = (a: SendAttachment) => (typeof a.content === 'string' ? Math.floor((a.content.length * 3) / 4) : a.content.length);

function checkSizes(attachments: SendAttachment[], body: string, limits: SendLimits): void {
  const attachmentBytes = attachments.reduce((n, a) => n + decodedSize(a), 0);
  if (attachmentBytes > limits.attachmentsMaxBytes) {
    throw tooBig('attachments', `Attachments total ${attachmentBytes} bytes; the limit is ${limits.attachmentsMaxBytes}`);
  }
  // On the wire: base64 grows attachments by a third; the HTML travels twice (HTML and text parts).
  const estimate = Math.ceil(attachmentBytes * 1.37) + Buffer.byteLength(body) * 2 + 16 * 1024;
  if (estimate > limits.messageMaxBytes) {
    throw tooBig('body', `The message would be about ${estimate} bytes; the limit is ${limits.messageMaxBytes}`);
  }
}

/** A submitted message for one recipient: as its sender wrote it, with tracking where the settings want it. */
function composeLiteral(c: Omit<ComposeInput, 'subject' | 'body' | 'values' | 'type'>, literal: LiteralContent): ComposedMessage {
  const html = literal.html === null ? null : addTracking(literal.html, c.emailId, c.links, effectiveTracking(c.settings, false, ...(c.tracking ?? [])));
  const text = literal.text ?? (literal.html === null ? null : (htmlToText(literal.html) ?? null));
  return { subject: literal.subject, html, text, headers: { ...c.headers } };
}

export interface QueuedEmailInput {
  id: string;
  projectId: string;
  contactId: string;
  templateId: string | null;
  type: EmailType;
  from: { email: string; name: string | null };
  replyTo: string;
  to: { email: string; name: string | null };
  message: ComposedMessage;
}

/**
 * Stores one rendered email as QUEUED in the caller's transaction, and NOTIFYs the dispatchers in the
 * same statement (delivered when the transaction commits; PostgreSQL sends one notification for all of
 * a transaction's identical ones, so a 50-recipient send still wakes them once), unless `notify` is
 * false: the caller tells a drain of its own process after the commit. `ON CONFLICT` makes a retried
 * caller with a derived id harmless, and then nothing is notified.
 */
export async function queueEmail(em: EntityManager, e: QueuedEmailInput, notify = true): Promise<boolean> {
  const domain = e.from.email.slice(e.from.email.lastIndexOf('@') + 1);
  const rows = await sql(
    em,
    `WITH queued AS (
       INSERT INTO emails (id, project_id, contact_id, template_id, type, from_email, from_name, reply_to, to_email, to_name,
                           subject, html, text, headers, message_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?) ON CONFLICT (id) DO NOTHING RETURNING 1
     )
     SELECT ${notify ? 'pg_notify(?, ?)' : '1'} FROM queued`,
    [
      e.id,
      e.projectId,
      e.contactId,
      e.templateId,
      e.type,
      e.from.email,
      e.from.name,
      e.replyTo,
      e.to.email,
      e.to.name,
      e.message.subject,
      e.message.html,
      e.message.text,
      JSON.stringify(e.message.headers),
      `<${e.id}@${domain}>`,
      ...(notify ? [EMAIL_QUEUED_CHANNEL, e.projectId] : []),
    ],
  );
  return rows.length > 0;
}

/**
 * POST /v1/send. Everything that can refuse the request is checked before anything is written; then,
 * in one transaction, each recipient gets their contact upsert and their own rendered, queued email.
 * The dispatchers are woken by a NOTIFY that fires only when that transaction commits.
 */
export async function sendEmails(
  em: EntityManager,
  projectId: string,
  input: SendRequest,
  deps: { links: Links; limits: SendLimits; queue?: LocalEmailQueue },
  /** The request's Idempotency-Key: marked done in the same transaction as the emails. */
  idempotency?: IdempotencyClaim,
): Promise<SendResult> {
  // Whatever fails from here on leaves the key without an outcome unless the transaction below committed.
  if (idempotency) idempotency.outcomeInTransaction = true;
  const template = input.template ? await getTemplate(em, projectId, input.template) : undefined;
  const subject = input.literal?.subject ?? input.subject ?? template?.subject;
  const body = input.literal ? (input.literal.html ?? input.literal.text ?? '') : (input.body ?? template?.body);
  if (subject === undefined) throw missing('subject', 'subject is required: the template has none');
  if (body === undefined) throw missing('body', 'body is required: the template has none');
  const sender = resolveSender(input, template);
  const replyTo = input.reply ?? template?.reply_to ?? sender.email;
  const type: EmailType = template?.type ?? 'TRANSACTIONAL';
  const given = stripped(input.attachments ?? []);
  checkSizes(given, body, deps.limits);
  const { settings, limits } = await sendingContext(em, projectId, sender.email);
  const to = recipients(input.to);
  const resolved = resolveDataMap(input.data);

  if (type === 'MARKETING') {
    // New contacts from /v1/send start unsubscribed unless `subscribed` says otherwise.
    const existing = await sql<{ email: string; subscribed: boolean }>(
      em,
      `SELECT email, subscribed FROM contacts WHERE project_id = ? AND email = ANY(?::text[])`,
      [projectId, to.map((r) => r.email)],
    );
    const known = new Map(existing.map((r) => [r.email, r.subscribed]));
    const refused = to.filter((r) => !(input.subscribed ?? known.get(r.email) ?? false)).map((r) => r.email);
    if (refused.length) {
      throw badRequest('A MARKETING template cannot be sent to unsubscribed contacts', 'CONTACT_UNSUBSCRIBED', {
        details: { emails: refused },
        suggestion: 'Use a TRANSACTIONAL template, or pass subscribed: true for contacts who opted in',
      });
    }
  }

  const attachments = decoded(given);
  // While a drain of this process runs, it is told after the commit instead of by a NOTIFY: a transaction
  // that notifies commits under PostgreSQL's one notify lock, so concurrent sends could not share a WAL
  // flush (npm run bench:send-db). Inside a caller's transaction the commit is not ours to wait for.
  const local = deps.queue?.draining && !insideTransaction(em) ? deps.queue : undefined;
  // Everything below goes through sql(), so the lean transaction serves (0.2 ms of CPU less a request).
  const result = await sqlTransaction(em, async (tx) => {
    await assertWithinBillingLimits(tx, projectId, to.length, limits);
    const emails: SendResult['emails'] = [];
    const events: EventRecord[] = [];
    for (const recipient of to) {
      const upsert = await upsertContact(tx, projectId, {
        email: recipient.email,
        subscribed: input.subscribed,
        defaultSubscribed: false,
        data: resolved,
      });
      events.push(...upsert.events);
      const contact = upsert.contact;
      const emailId = newId();
      const common = {
        emailId,
        contact: { id: contact.id, email: contact.email, data: contact.data },
        headers: input.headers ?? {},
        settings,
        tracking: [input.tracking, template?.tracking],
        links: deps.links,
      };
      const message = input.literal
        ? composeLiteral(common, input.literal)
        : composeMessage({ ...common, type, subject, body, values: resolved.values });
      await queueEmail(tx, {
        id: emailId,
        projectId,
        contactId: contact.id,
        templateId: template?.id ?? null,
        type,
        from: sender,
        replyTo,
        to: { email: contact.email, name: recipient.name },
        message,
      }, !local);
      if (attachments.length) await insertAttachments(tx, emailId, attachments);
      emails.push({ contact: { id: contact.id, email: contact.email }, email: emailId });
    }
    const timestamp = new Date().toISOString();
    // The key says "done", with the answer, in the transaction that wrote the emails.
    await markIdempotentSuccess(tx, projectId, idempotency, { emails, timestamp });
    return { emails, timestamp, events };
  });
  local?.queuedHere();
  return result;
}

async function insertAttachments(em: EntityManager, emailId: string, attachments: ReturnType<typeof decoded>): Promise<void> {
  await sql(
    em,
    `INSERT INTO email_attachments (id, email_id, position, filename, content_type, content_id, disposition, content)
     SELECT * FROM unnest(?::uuid[], ?::uuid[], ?::int[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bytea[])`,
    [
      attachments.map(() => newId()),
      attachments.map(() => emailId),
      attachments.map((_, i) => i),
      attachments.map((a) => a.filename),
      attachments.map((a) => a.contentType),
      attachments.map((a) => a.contentId ?? null),
      attachments.map((a) => a.disposition),
      attachments.map((a) => a.content),
    ],
  );
}
