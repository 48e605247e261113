import { assertWithinBillingLimits } from '../billing';
import type { EntityManager } from '@mikro-orm/postgresql';
import addressparser from 'nodemailer/lib/addressparser';
import { newId } from '../../db/ids';
import { insideTransaction, isForeignKeyViolation, type Orm, transaction } from '../../db/orm';
import { StatementBatcher } from '../../db/statement-batcher';
import { AppError, badRequest } from '../../errors';
import { type IdempotencyClaim, markIdempotentSuccess } from '../../db/idempotency-keys';
import type { Links } from '../../mail/links';
import { ADDRESS_SHAPE } from '../../mail/mime';
import { htmlToText } from '../../mail/text';
import { addTracking } from '../../mail/tracking';
import { type ComposedMessage, type ComposeInput, composeMessage, effectiveTracking } from '../../mail/compose';
import { RenderDeadline, TEMPLATE_LIMITS } from '../../mail/liquid';
import { applyData, resolveDataMap } from '../contacts';
import { upsertContact } from '../contacts';
import type { EventRecord } from '../events';
import { checkedContent, getTemplate, sendableBody, type Template, templateErrorResponse } from '../templates';
import type { AttachmentInput, SendInput } from './emails.schemas';
import { type DrainClaimant, type QueuedEmail } from '../../delivery';
import { sendingContext } from './sending-context';
import { insertAttachments, messageIdOf, queueEmail, type QueuedSend, queueSends, recordSuppressedEmail } from './emails.queries';

export type EmailType = Template['type'];

export interface SendLimits {
  attachmentsMaxBytes: number;
  messageMaxBytes: number;
}

/** The email queue of this process's own worker (its `QueueSignal`), when it runs one. */
export interface LocalEmailQueue {
  readonly draining: boolean;
  queuedHere(): void;
  /** A running drain of this process that takes mail claimed for it at insert, in memory (`DeliveryEngine.claimant`). */
  claimant?(): DrainClaimant | undefined;
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
  /** One per recipient: `status` SUPPRESSED when its address is suppressed (recorded, never sent). */
  emails: Array<{ contact: { id: string; email: string }; email: string; status: 'QUEUED' | 'SUPPRESSED' }>;
  timestamp: string;
  /** Events written along the way (subscription changes), for whoever reacts to events. */
  events: EventRecord[];
}

/** The message would be over the size limits: 422 over HTTP, 552 5.3.4 in SMTP. */
export class MessageTooBig extends AppError {
  constructor(field: string, message: string) {
    super(422, 'VALIDATION_ERROR', 'Request validation failed', { errors: [{ field, message, code: 'too_big' }] });
  }
}

function missing(field: string, message: string): AppError {
  return new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: [{ field, message, code: 'invalid_type' }],
  });
}

/** `from` as a string (possibly `Name <addr>`) or an object; the deprecated `name` fills in a missing name. */
function resolveSender(input: SendRequest, template?: Template): { email: string; name: string | null } {
  if (input.from === undefined) {
    if (!template) throw missing('from', 'from is required without a template that has one');
    return { email: template.fromEmail, name: input.name ?? template.fromName };
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
    throw new MessageTooBig('attachments', `Attachments total ${attachmentBytes} bytes; the limit is ${limits.attachmentsMaxBytes}`);
  }
  // On the wire: base64 grows attachments by a third; the HTML travels twice (HTML and text parts).
  const estimate = Math.ceil(attachmentBytes * 1.37) + Buffer.byteLength(body) * 2 + 16 * 1024;
  if (estimate > limits.messageMaxBytes) {
    throw new MessageTooBig('body', `The message would be about ${estimate} bytes; the limit is ${limits.messageMaxBytes}`);
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
  /** Null only for a campaign's test send to an address that is no contact of the project. */
  contactId: string | null;
  templateId: string | null;
  type: EmailType;
  from: { email: string; name: string | null };
  replyTo: string;
  to: { email: string; name: string | null };
  message: ComposedMessage;
}

/** An email as delivery reads it, for mail handed to a drain in memory instead of read back (its first attempt). */
const asClaimed = (e: QueuedEmailInput): QueuedEmail => ({
  id: e.id,
  project_id: e.projectId,
  contact_id: e.contactId,
  template_id: e.templateId,
  campaign_id: null,
  from_email: e.from.email,
  from_name: e.from.name,
  reply_to: e.replyTo,
  to_email: e.to.email,
  to_name: e.to.name,
  subject: e.message.subject,
  html: e.message.html,
  text: e.message.text,
  headers: e.message.headers,
  message_id: messageIdOf(e),
  attempts: 1,
});

/**
 * POST /v1/send. Everything that can refuse the request is checked before anything is written; then
 * each recipient gets their contact upserted and their own rendered, queued email, all or none. The
 * dispatchers are woken by a NOTIFY that fires only when that commits (or told in-process, below).
 *
 * The common send (each recipient new, or a contact whose subscription it leaves alone; no billing caps
 * to count against; no attachments) is written by one statement, which is its own transaction
 * (`queueSends`), shared with concurrent sends when `deps.batcher` is given: two round trips in all
 * instead of five. Every other send, and one whose recipients changed between the read and that
 * statement, takes a transaction that locks each contact.
 */
export async function sendEmails(
  em: EntityManager,
  projectId: string,
  input: SendRequest,
  deps: { links: Links; limits: SendLimits; queue?: LocalEmailQueue; batcher?: SendBatcher },
  /** The request's Idempotency-Key: marked done in the same transaction as the emails. */
  idempotency?: IdempotencyClaim,
): Promise<SendResult> {
  // Whatever fails from here on leaves the key without an outcome unless the transaction below committed.
  if (idempotency) idempotency.outcomeInTransaction = true;
  const template = input.template ? await getTemplate(em, projectId, input.template) : undefined;
  const subject = input.literal?.subject ?? input.subject ?? template?.subject;
  const body = input.literal ? (input.literal.html ?? input.literal.text ?? '') : (input.body ?? (template && sendableBody(template)));
  if (subject === undefined) throw missing('subject', 'subject is required: the template has none');
  if (body === undefined) throw missing('body', 'body is required: the template has none');
  // An inline subject or body is written with the request: one that does not parse sends nothing.
  if (!input.literal) await checkedContent({ subject: input.subject, body: input.body, format: 'html' });
  const sender = resolveSender(input, template);
  const replyTo = input.reply ?? template?.replyTo ?? sender.email;
  const type: EmailType = template?.type ?? 'TRANSACTIONAL';
  const given = stripped(input.attachments ?? []);
  checkSizes(given, body, deps.limits);
  const to = recipients(input.to);
  const {
    settings,
    limits,
    contacts: known,
    suppressed,
  } = await sendingContext(
    em,
    projectId,
    sender.email,
    to.map((r) => r.email),
  );
  const resolved = resolveDataMap(input.data);

  if (type === 'MARKETING') {
    // New contacts from /v1/send start unsubscribed unless `subscribed` says otherwise.
    // A suppressed recipient is not refused: its email is recorded SUPPRESSED, never sent.
    const refused = to.filter((r) => !suppressed.has(r.email) && !(input.subscribed ?? known.get(r.email)?.subscribed ?? false)).map((r) => r.email);
    if (refused.length) {
      throw badRequest('A MARKETING template cannot be sent to unsubscribed contacts', 'CONTACT_UNSUBSCRIBED', {
        details: { emails: refused },
        suggestion: 'Use a TRANSACTIONAL template, or pass subscribed: true for contacts who opted in',
      });
    }
  }

  const attachments = decoded(given);
  // Rendered on the event loop while the request waits: every recipient's render shares one deadline.
  const deadline = new RenderDeadline(TEMPLATE_LIMITS.requestRenderMs);
  /** One recipient's message, rendered with their contact's data as it is after this send's changes. */
  const compose = (emailId: string, contact: { id: string; email: string; data: Record<string, unknown> }): ComposedMessage => {
    const common = { emailId, contact, headers: input.headers ?? {}, settings, tracking: [input.tracking, template?.tracking], links: deps.links };
    if (input.literal) return composeLiteral(common, input.literal);
    try {
      return composeMessage({ ...common, type, subject, body, values: resolved.values, deadline });
    } catch (err) {
      // Rendered with the request: a cap one recipient's data passes refuses the request, which sends nothing.
      return templateErrorResponse(err);
    }
  };
  const queued = (id: string, contact: { id: string; email: string }, recipient: { name: string | null }, message: ComposedMessage): QueuedEmailInput => ({
    id,
    projectId,
    contactId: contact.id,
    templateId: template?.id ?? null,
    type,
    from: sender,
    replyTo,
    to: { email: contact.email, name: recipient.name },
    message,
  });
  // While a drain of this process runs, it is told after the commit instead of by a NOTIFY: a transaction
  // that notifies commits under PostgreSQL's one notify lock, so concurrent sends could not share a WAL
  // flush (npm run bench:send-db). Inside a caller's transaction the commit is not ours to wait for.
  const local = deps.queue?.draining && !insideTransaction(em) ? deps.queue : undefined;

  const oneStatement =
    !attachments.length &&
    // A suppressed recipient's email is recorded with its event: the transaction's work.
    suppressed.size === 0 &&
    !insideTransaction(em) &&
    limits.emails === null &&
    limits.contacts === null &&
    // A write of `subscribed` that changes it (or ends a snooze) writes its event: the transaction's work.
    to.every((r) => {
      const contact = known.get(r.email);
      return !contact || input.subscribed === undefined || (contact.subscribed === input.subscribed && !contact.snoozed);
    });
  if (oneStatement) {
    const emails: QueuedEmailInput[] = to.map((r) => {
      const contact = known.get(r.email);
      const next = { id: contact?.id ?? newId(), email: contact?.email ?? r.email, data: applyData(contact?.data ?? {}, resolved) };
      const id = newId();
      return queued(id, next, r, compose(id, next));
    });
    const result = {
      emails: emails.map((e) => ({ contact: { id: e.contactId!, email: e.to.email }, email: e.id, status: 'QUEUED' as const })),
      timestamp: new Date().toISOString(),
      events: [],
    };
    // While a drain of this process runs, the mail is claimed for it as it is inserted and handed to it
    // in memory: no claim to write and nothing to read back.
    const claimant = local?.claimant?.();
    const send: QueuedSend = {
      emails,
      created: { known: new Set([...known.values()].map((c) => c.id)), subscribed: input.subscribed ?? false, data: resolved },
      notify: !local,
      claimedBy: claimant?.owner,
      idempotency: idempotency && { key: idempotency.key, response: { emails: result.emails, timestamp: result.timestamp } },
    };
    let written = false;
    try {
      await (deps.batcher ? deps.batcher.write(send) : queueSends(em, [send]));
      written = true;
    } catch (err) {
      // A recipient who was not a contact as the send read them (or was): the locking transaction below.
      if (!isForeignKeyViolation(err)) throw err;
    } finally {
      claimant?.handOver(written ? emails.map(asClaimed) : []);
    }
    if (written) {
      if (!claimant) local?.queuedHere();
      return result;
    }
  }

  const result = await transaction(em, async (tx) => {
    await assertWithinBillingLimits(tx, projectId, to.length - suppressed.size, limits);
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
      const why = suppressed.get(recipient.email);
      if (why) {
        // Only DELETE /suppressions/:email lifts a suppression: `subscribed: true` above changed the subscription alone.
        events.push(...(await recordSuppressedEmail(tx, queued(emailId, contact, recipient, compose(emailId, contact)), why)));
        emails.push({ contact: { id: contact.id, email: contact.email }, email: emailId, status: 'SUPPRESSED' });
        continue;
      }
      await queueEmail(tx, queued(emailId, contact, recipient, compose(emailId, contact)), !local);
      if (attachments.length) await insertAttachments(tx, emailId, attachments);
      emails.push({ contact: { id: contact.id, email: contact.email }, email: emailId, status: 'QUEUED' });
    }
    const timestamp = new Date().toISOString();
    // The key says "done", with the answer, in the transaction that wrote the emails.
    await markIdempotentSuccess(tx, projectId, idempotency, { emails, timestamp });
    return { emails, timestamp, events };
  });
  local?.queuedHere();
  return result;
}

/**
 * Writes the sends of concurrent requests that take one statement together (`StatementBatcher`): under
 * load PostgreSQL sees one statement and one commit for several sends (npm run bench:send-db with
 * BENCH_RECIPIENTS shows what that saves per email). A contact is written by one statement at a time.
 * One statement at a time by default: it cost PostgreSQL less per send than two (larger batches) and
 * delivered more (docs/performance.md).
 */
export class SendBatcher extends StatementBatcher<QueuedSend, void> {
  constructor(orm: Orm, maxRows = 100, maxInFlight = 1) {
    super({
      write: async (sends) => {
        await queueSends(orm.em.fork(), sends);
        return sends.map(() => undefined);
      },
      keys: (send) => send.emails.map((e) => `${e.projectId} ${e.to.email}`),
      rows: (send) => send.emails.length,
      maxRows,
      maxInFlight,
    });
  }
}
