import crypto from 'node:crypto';
import { type AddressObject, type ParsedMail, simpleParser } from 'mailparser';
import type { Logger } from 'pino';
import type { Orm } from '../../db/orm';
import { AppError } from '../../errors';
import { claimIdempotencyKey, claimRetryAfter, type IdempotencyClaim, type KeyRow, releaseUnfinished } from '../../db/idempotency-keys';
import type { RateLimiter } from '../../db/rate-limiter';
import type { Links } from '../../mail/links';
import { mailbox } from '../../mail/mime';
import { SmtpReply, type SubmissionHandler } from '../../mail/submission-listener';
import type { ProjectKeyCache } from '../accounts';
import type { TrackingOverride } from '../accounts';
import { assertVerifiedSender } from '../domains';
import type { ActivityHub } from '../../bus/contact-activity';
import { parse } from '../../validation';
import { HEADER_NAME, STRUCTURAL_HEADERS, submittedSendSchema } from './emails.schemas';
import { type LocalEmailQueue, MessageTooBig, type SendBatcher, type SendLimits, type SendRequest, sendEmails } from './emails.service';

/** The idempotency key's request name for a submitted message (HTTP keys say `POST /v1/send`). */
const SMTP_REQUEST = 'SMTP DATA';

/** Headers a client may add to steer the service; never delivered. */
export const SUBMISSION_HEADERS = {
  template: 'x-postbox-template',
  data: 'x-postbox-data',
  subscribed: 'x-postbox-subscribed',
  tracking: 'x-postbox-tracking',
} as const;

/** Client headers not carried over: the service sets them, they describe the client's own transport, or steer the service. */
const DROPPED = /^(received|x-postbox-.*|content-.*|arc-.*|authentication-results|x-google-dkim-signature|x-received|delivered-to)$/i;

interface Submitter {
  projectId: string;
  /** The key it authenticated with: looked up again per message, so a rotated key or a disabled project stops sending. */
  key: string;
  /**
   * Envelope senders found verified on this connection. The MAIL FROM check only refuses early: what
   * counts is the From: domain, checked again in the transaction that writes the emails.
   */
  verifiedSenders: Set<string>;
}

const refuse = (message: string) => new SmtpReply(550, `5.6.0 ${message}`);

function addresses(field: AddressObject | AddressObject[] | undefined): Array<{ address: string; name: string }> {
  const list = field === undefined ? [] : Array.isArray(field) ? field : [field];
  return list
    .flatMap((o) => o.value.flatMap((a) => (a.group ? a.group : [a])))
    .flatMap((a) => (a.address ? [{ address: a.address.toLowerCase(), name: a.name ?? '' }] : []));
}

/**
 * RFC 5322 allows CR only before LF, and text never holds NUL (PostgreSQL refuses it). mailparser turns a
 * bare CR into a space, but on the way out it would end a header line, so a value could smuggle in a
 * header of its own (a second From:). Refused like /v1/send refuses it, naming the header where it is one.
 */
function refuseBareCrOrNul(raw: Buffer): void {
  const text = raw.toString('latin1');
  const found = /\r(?!\n)|\0/.exec(text);
  if (!found) return;
  // The header line it is on, walking back over folded continuation lines.
  let start = text.lastIndexOf('\n', found.index) + 1;
  while (start > 1 && (text[start] === ' ' || text[start] === '\t')) start = text.lastIndexOf('\n', start - 2) + 1;
  const name = /^([\x21-\x39\x3b-\x7e]{1,100}):/.exec(text.slice(start, found.index))?.[1];
  if (name) throw refuse(`${name}: Header values cannot contain CR, LF or NUL`);
  const line = text.slice(0, found.index).split('\n').length;
  throw refuse(`the body: line ${line} holds ${found[0] === '\0' ? 'a NUL byte' : 'a CR not followed by LF'}, which mail cannot carry`);
}

/** The client's own headers worth delivering (custom ones, threading, List-Unsubscribe), unfolded. */
function customHeaders(parsed: ParsedMail): Record<string, string> {
  const out: Record<string, string> = {};
  for (const { key, line } of parsed.headerLines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim();
    if (STRUCTURAL_HEADERS.has(key) || DROPPED.test(key) || !HEADER_NAME.test(name) || name in out) continue;
    out[name] = line
      .slice(colon + 1)
      .replace(/\r?\n[ \t]+/g, ' ')
      .trim();
  }
  return out;
}

/** `X-Postbox-Tracking: clicks` keeps click tracking and turns the pixel off; `none` turns both off. */
function trackingHeader(value: string): TrackingOverride {
  const words = new Set(
    value
      .toLowerCase()
      .split(/[\s,]+/)
      .filter(Boolean),
  );
  for (const w of words) {
    if (!['opens', 'clicks', 'none'].includes(w)) throw refuse(`X-Postbox-Tracking takes opens, clicks or none, not "${w}"`);
  }
  return { opens: words.has('opens'), clicks: words.has('clicks') };
}

function booleanHeader(name: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === 'yes' || v === '1') return true;
  if (v === 'false' || v === 'no' || v === '0') return false;
  throw refuse(`${name} is true or false, not "${value}"`);
}

/** RFC 2047 encoded-words back to text: nodemailer, for one, writes any header value with quotes that way. */
function decodeWords(value: string): string {
  return value.replace(/\?=\s+=\?/g, '?==?').replace(/=\?([^?]+)\?([QqBb])\?([^?]*)\?=/g, (_w, charset: string, encoding: string, text: string) => {
    const bytes =
      encoding.toUpperCase() === 'B'
        ? Buffer.from(text, 'base64')
        : Buffer.from(
            text.replace(/_/g, ' ').replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16))),
            'latin1',
          );
    try {
      return new TextDecoder(charset).decode(bytes);
    } catch {
      return bytes.toString('utf8');
    }
  });
}

/** A steering header's value as the client meant it (mailparser leaves unknown headers encoded). */
const header = (parsed: ParsedMail, name: string) => {
  const v = parsed.headers.get(name);
  return typeof v === 'string' ? decodeWords(v) : undefined;
};

/**
 * The message as /v1/send would take it, checked by /v1/send's own schema and limits (`submittedSendSchema`
 * through the same `parse`): its HTML or text is the body, taken literally; or a template with X-Postbox-Data.
 */
function sendRequestOf(parsed: ParsedMail, envelope: { from: string | null; to: string[] }): SendRequest {
  const [fromHeader] = addresses(parsed.from);
  const from = fromHeader ?? (envelope.from ? { address: envelope.from, name: '' } : undefined);
  if (!from) throw refuse('The message has no From: header');
  const named = new Map([...addresses(parsed.to), ...addresses(parsed.cc)].map((a) => [a.address, a.name]));
  const headers = customHeaders(parsed);
  const [reply] = addresses(parsed.replyTo);

  const template = header(parsed, SUBMISSION_HEADERS.template)?.trim();
  const dataHeader = header(parsed, SUBMISSION_HEADERS.data);
  let data: unknown;
  if (dataHeader !== undefined) {
    try {
      data = JSON.parse(dataHeader);
    } catch {
      throw refuse('X-Postbox-Data must be a JSON object');
    }
  }
  const subscribed = header(parsed, SUBMISSION_HEADERS.subscribed);
  const tracking = header(parsed, SUBMISSION_HEADERS.tracking);
  const html = typeof parsed.html === 'string' && parsed.html.trim() ? parsed.html : undefined;
  const text = parsed.text?.trim() ? parsed.text : undefined;

  const submitted = parse(submittedSendSchema, {
    to: envelope.to.map((email) => ({ email, name: named.get(email) || undefined })),
    from: { email: from.address, name: from.name || undefined },
    subject: parsed.subject || undefined,
    body: template === undefined ? (html ?? text) : undefined,
    text: template === undefined && html !== undefined ? text : undefined,
    // Its display names come decoded from encoded-words, so they are checked like a recipient's name.
    cc: addresses(parsed.cc).map((a) => ({ email: a.address, name: a.name || undefined })),
    template,
    headers,
    data,
    reply: reply?.address,
    subscribed: subscribed === undefined ? undefined : booleanHeader('X-Postbox-Subscribed', subscribed),
    tracking: tracking === undefined ? undefined : trackingHeader(tracking),
    attachments: parsed.attachments.map((a, i) => {
      const inline = Boolean(a.cid) && (a.related || a.contentDisposition === 'inline');
      return {
        // Quotes are the API's own rule for the filenames it writes; mail clients write them in names like "Q3's.pdf".
        filename: (a.filename ?? `attachment-${i + 1}`).replace(/["'\u2028\u2029\u0085]/g, '_'),
        content: a.content,
        contentType: a.contentType || 'application/octet-stream',
        contentId: inline ? a.cid : undefined,
        disposition: inline ? ('inline' as const) : ('attachment' as const),
      };
    }),
  });
  const { body: _body, text: _text, cc, ...checked } = submitted;
  // Cc is shown as the client wrote it (its addresses parsed, names encoded); every envelope recipient, Bcc
  // ones too, gets an email of their own.
  const request = cc?.length
    ? { ...checked, headers: { ...checked.headers, Cc: cc.map((a) => mailbox({ address: a.email, name: a.name ?? null })).join(', ') } }
    : checked;
  if (submitted.template !== undefined) return request;
  return { ...request, literal: { subject: submitted.subject ?? '', html: html ?? null, text: text ?? null } };
}

/** Where in the message a field of /v1/send came from, so a refusal names what the client wrote. */
function fieldInMessage(field: string): string {
  const [head, ...rest] = field.split('.');
  const named: Record<string, string> = {
    template: 'X-Postbox-Template',
    data: 'X-Postbox-Data',
    subject: 'Subject',
    from: 'From',
    to: 'To',
    cc: 'Cc',
    reply: 'Reply-To',
    body: 'the body',
    text: 'the text part',
  };
  if (head === 'headers' && rest.length) return rest.join('.');
  if (head === 'data' && rest.length) return `X-Postbox-Data ${rest.join('.')}`;
  return named[head] ?? field;
}

/** A refusal of the send path in SMTP's words: permanent for what the message or project got wrong, temporary for limits. */
function smtpReplyOf(err: unknown): unknown {
  if (!(err instanceof AppError)) return err;
  const first = err.opts.errors?.[0];
  if (err instanceof MessageTooBig) return new SmtpReply(552, `5.3.4 ${first?.message ?? err.message}`);
  if (err.status === 429) return new SmtpReply(451, `4.7.1 ${err.message}`);
  if (err.status === 403 || err.code === 'CONTACT_UNSUBSCRIBED') return new SmtpReply(550, `5.7.1 ${err.message}`);
  if (err.status === 404) return refuse(err.message);
  if (err.status === 422 || err.status === 400) return refuse(first ? `${fieldInMessage(first.field)}: ${first.message}` : err.message);
  return err;
}

/** Long Message-IDs are keyed by their hash: the key column is the HTTP header's, meant for short values. */
const keyOf = (messageId: string) =>
  messageId.length <= 200 ? `smtp:${messageId}` : `smtp:sha256:${crypto.createHash('sha256').update(messageId).digest('hex')}`;

/**
 * SMTP submission for the listener in mail/submission-listener.ts: a secret key authenticates; each message
 * becomes what POST /v1/send would make of it, one email per envelope recipient, in one transaction
 * that also records its Message-ID, so the same message sent again is answered with the same ids.
 */
export class SmtpSubmission implements SubmissionHandler<Submitter> {
  constructor(
    private readonly deps: {
      orm: Orm;
      keys: ProjectKeyCache;
      limiter: RateLimiter;
      links: Links;
      limits: SendLimits;
      queue?: LocalEmailQueue;
      batcher?: SendBatcher;
      hub: ActivityHub;
      idempotencyTtlHours: number;
      log: Logger;
    },
  ) {}

  private async owner(key: string) {
    return key.startsWith('sk_') ? this.deps.keys.lookup(this.deps.orm.em.fork(), 'secret', key) : undefined;
  }

  async authenticate(password: string): Promise<Submitter> {
    const owner = await this.owner(password.trim());
    if (!owner) throw new SmtpReply(535, "5.7.8 Authentication failed: the password is a project's secret key (sk_...)");
    if (owner.disabled)
      throw new SmtpReply(535, `5.7.8 Authentication failed: the project is disabled${owner.disabledReason ? `: ${owner.disabledReason}` : ''}`);
    return { projectId: owner.projectId, key: password.trim(), verifiedSenders: new Set() };
  }

  async mailFrom(user: Submitter, address: string | null): Promise<void> {
    const owner = await this.owner(user.key);
    if (!owner || owner.projectId !== user.projectId || owner.disabled) {
      throw new SmtpReply(550, '5.7.1 This key no longer sends: it was rotated, or the project is disabled');
    }
    const rate = await this.deps.limiter.take(user.projectId);
    if (!rate.allowed) throw new SmtpReply(451, `4.7.1 Rate limit of ${rate.limit} requests per minute exceeded; try again in ${rate.resetSeconds} s`);
    if (address === null || user.verifiedSenders.has(address)) return;
    try {
      await assertVerifiedSender(this.deps.orm.em.fork(), user.projectId, address);
    } catch (err) {
      throw smtpReplyOf(err);
    }
    user.verifiedSenders.add(address);
  }

  async submit(user: Submitter, envelope: { from: string | null; to: string[] }, raw: Buffer): Promise<string[]> {
    // Anything wrong with the message itself is the client's to fix: permanent (5.6.0), never "send again".
    let parsed: ParsedMail;
    let request: SendRequest;
    try {
      refuseBareCrOrNul(raw);
      // The client's cid: references stay as they are: the inline parts go out with the same Content-IDs.
      parsed = await simpleParser(raw, { keepCidLinks: true, skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true });
      // The From: domain is checked by sendEmails before it writes anything (the envelope's was, at MAIL FROM).
      request = sendRequestOf(parsed, envelope);
    } catch (err) {
      if (err instanceof SmtpReply || err instanceof AppError) throw smtpReplyOf(err);
      throw refuse(`The message could not be read: ${err instanceof Error ? err.message : String(err)}`);
    }
    const em = this.deps.orm.em.fork();
    let claim: IdempotencyClaim | undefined;
    if (parsed.messageId) {
      const key = keyOf(parsed.messageId);
      const earlier = await claimIdempotencyKey(em, user.projectId, key, SMTP_REQUEST, this.deps.idempotencyTtlHours);
      if (earlier !== null) return this.answerAgain(parsed.messageId, earlier.row);
      claim = { key, outcomeInTransaction: true };
    }
    try {
      const result = await sendEmails(em, user.projectId, request, this.deps, claim);
      this.deps.hub.publish({ projectId: user.projectId, contactIds: result.emails.map((e) => e.contact.id), events: result.events });
      return result.emails.map((e) => e.email);
    } catch (err) {
      // Nothing was written: the key is let go, so the client's next attempt runs.
      if (claim) void releaseUnfinished(em, user.projectId, claim.key, this.deps.log);
      throw smtpReplyOf(err);
    }
  }

  /** The same message again: the first acceptance's ids, or "wait" while that acceptance is still under way. */
  private answerAgain(messageId: string, row: KeyRow | undefined): string[] {
    const kept = row?.response as { emails?: Array<{ email: string }> } | null | undefined;
    if (row && row.request !== SMTP_REQUEST) throw refuse(`Message-ID ${messageId} was used as an Idempotency-Key by ${row.request}`);
    if (row?.status_code === 200 && kept?.emails) return kept.emails.map((e) => e.email);
    const wait = row && row.status_code === null ? claimRetryAfter(row) : 1;
    throw new SmtpReply(451, `4.3.0 This message (${messageId}) is being accepted on another connection; try again in ${wait} s`);
  }
}
