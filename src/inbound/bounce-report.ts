/**
 * What came back: a delivery-status report (RFC 3464) or an MTA's plain-text bounce, a delay warning, a feedback-loop
 * complaint (ARF, RFC 5965, and the non-ARF formats big mailbox providers send), or an auto-reply (RFC 3834).
 * Pure: bytes in, a typed report out; it never throws, and every scan is bounded so hostile mail cannot make it slow.
 */
import {
  bounceTypeOf,
  decideReason,
  findCommand,
  findEnhancedStatus,
  findReplyCode,
  subTypeOf,
  type BounceReason,
  type BounceType,
  type ReasonEvidence,
} from '../mail/bounce-reasons';

import { header, type Headers, MAX_HEADER_LINES, MAX_TEXT, parseHeaders, readMessage } from './report-mime';

export type { BounceReason, BounceType } from '../mail/bounce-reasons';

export interface RecipientOutcome {
  /** Final-Recipient (else Original-Recipient / the address named in the text), lower-cased. */
  recipient: string | null;
  action: 'failed' | 'delayed' | 'delivered' | 'relayed' | 'expanded' | null;
  /** Enhanced status code, e.g. '5.1.1'. */
  status: string | null;
  /** SMTP reply code, e.g. '550'. */
  replyCode: string | null;
  /** The remote server's words, unfolded, trimmed, bounded in length. */
  diagnosticCode: string | null;
  remoteMta: string | null;
  reason: BounceReason;
  /** sisimai's hardbounce true → Permanent; onhold/undefined → Undetermined; otherwise Transient. */
  bounceType: BounceType;
  /** Amazon SES's bounceSubType vocabulary; the mapping lives in mail/bounce-reasons.ts (subTypeOf). */
  subType: string;
}

export interface OriginalMessage {
  /** As written in the returned message's header, angle brackets included: '<id@host>'. */
  messageId: string | null;
  /** The returned message's Return-Path, else the address this report was sent to (a bounce goes to the envelope sender). */
  returnPath: string | null;
  from: string | null;
  to: string | null;
}

export type InboundReport =
  | { kind: 'bounce'; reportingMta: string | null; recipients: RecipientOutcome[]; original: OriginalMessage }
  | { kind: 'delay'; reportingMta: string | null; recipients: RecipientOutcome[]; original: OriginalMessage }
  | {
      kind: 'complaint';
      feedbackType: string;
      userAgent: string | null;
      /** The first complaining recipient; a report can name several (`recipients`). */
      recipient: string | null;
      recipients: string[];
      sourceIp: string | null;
      arrivalDate: string | null;
      original: OriginalMessage;
    }
  | { kind: 'auto-reply'; why: string; original: OriginalMessage }
  | { kind: 'unknown'; why: string };

export { MAX_MESSAGE_BYTES } from './report-mime';
const MAX_DIAGNOSTIC = 1000;
const MAX_RECIPIENTS = 500;
const MAX_ADDRESS_LINE = 1000;

// ---------------------------------------------------------------------------------------------------------------------
// Addresses and the returned original

const ADDRESS = /[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?){1,8}/g;

function firstAddress(value: string | null | undefined): string | null {
  if (!value) return null;
  const bracketed = /<([^<>\s]{1,254}@[^<>\s]{1,254})>/.exec(value.slice(0, 4096));
  if (bracketed) return bracketed[1].replace(/^['"]|['"]$/g, '');
  ADDRESS.lastIndex = 0;
  const bare = ADDRESS.exec(value.slice(0, 4096));
  return bare ? bare[0].replace(/^[.'"]+|[.'"]+$/g, '') : null;
}

const isDaemon = (address: string) => /^(?:mailer-daemon|postmaster|mail-daemon|mailerdaemon|maildaemon|root|nobody|double-bounce)@/i.test(address);

function messageIdOf(value: string | null): string | null {
  if (!value) return null;
  const bracketed = /<[^<>\s]{1,900}>/.exec(value);
  if (bracketed) return bracketed[0];
  const bare = value.trim().split(/\s+/)[0];
  return bare ? `<${bare.slice(0, 900)}>` : null;
}

/**
 * Separator lines MTAs put before the copy of the returned message. Tested one line at a time on the line's first
 * MARKER_LINE characters only, so the cost is linear in the text whatever it holds.
 */
const ORIGINAL_MARKER = new RegExp(
  [
    '^.{0,20}(?:-{2,}|={2,}|\\*{2,}|_{2,}).{0,20}(?:copy of the message|original message|returned message|undelivered message|message follows',
    'message headers? follows?|headers? of (?:the|your) (?:original )?message|below this line is a copy|original headers|unsent message',
    'rfc822 message|header of original message|message text follows)',
    '^(?:original message follows|------ original message|--- below this line is a copy|unsent message below|message headers follow',
    'the headers of your message)',
    '^content-type: (?:message/rfc822|text/rfc822-headers)',
  ].join('|'),
  'i',
);
const MARKER_LINE = 120;
const MARKER_WORDS = /message|header|copy|unsent|content-type/i;

/** Where the first separator line before the returned message starts, and where it ends; null when there is none. */
function originalMarker(text: string): { index: number; end: number } | null {
  for (let at = 0; at < text.length;) {
    const newline = text.indexOf('\n', at);
    const end = newline < 0 ? text.length : newline;
    const line = text.slice(at, Math.min(end, at + MARKER_LINE));
    // The pattern runs only on lines that hold one of its words: a page of rules and dashes costs one scan.
    const m = MARKER_WORDS.test(line) ? ORIGINAL_MARKER.exec(line) : null;
    if (m) return { index: at, end: at + m[0].length };
    at = end + 1;
  }
  return null;
}

/** The header block of the returned original quoted in a plain-text bounce: the first run of header lines naming it. */
function quotedOriginalHeaders(text: string): Headers | null {
  const marker = originalMarker(text);
  const from = marker ? marker.end : 0;
  const tail = text.slice(from, from + 64 * 1024);
  const start = /^(?:return-path|received|message-id|from|to|subject|date|mime-version|delivered-to|dkim-signature|x-[a-z0-9-]{1,40})[ \t]*:/im.exec(tail);
  if (!start) return null;
  const headers = parseHeaders(tail.slice(start.index).split(/\n[ \t]*\n/, 1)[0]);
  return header(headers, 'message-id') || header(headers, 'from') ? headers : null;
}

function originalFrom(headers: Headers | null, report: Headers): OriginalMessage {
  const returnPath = firstAddress(headers && header(headers, 'return-path'));
  const envelope = firstAddress(header(report, 'x-original-to') ?? header(report, 'delivered-to') ?? header(report, 'to'));
  return {
    messageId: headers ? messageIdOf(header(headers, 'message-id')) : null,
    returnPath: (returnPath ?? envelope)?.toLowerCase() ?? null,
    from: firstAddress(headers && header(headers, 'from'))?.toLowerCase() ?? null,
    to: firstAddress(headers && header(headers, 'to'))?.toLowerCase() ?? null,
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Recipients and their evidence

interface Finding {
  recipient: string | null;
  action: RecipientOutcome['action'];
  status: string | null;
  replyCode: string | null;
  diagnostic: string;
  diagnosticType: string | null;
  remoteMta: string | null;
  command: ReasonEvidence['command'];
  verdict: BounceReason | null;
}

const ACTIONS = new Set(['failed', 'delayed', 'delivered', 'relayed', 'expanded']);

function normaliseAction(value: string | null | undefined): RecipientOutcome['action'] {
  const word = (value ?? '')
    .trim()
    .toLowerCase()
    .split(/[\s(;]/)[0];
  if (ACTIONS.has(word)) return word as RecipientOutcome['action'];
  if (word === 'failure' || word === 'expired') return 'failed';
  return null;
}

const unfold = (text: string) => text.replace(/\s+/g, ' ').trim();

/** "rfc822; a@b" / "smtp; 550 ..." → the type and the value. */
function typed(value: string | null): { type: string | null; value: string } {
  if (!value) return { type: null, value: '' };
  const m = /^\s*([A-Za-z0-9-]{1,20})\s*;\s*([\s\S]*)$/.exec(value);
  return m ? { type: m[1].toLowerCase(), value: m[2] } : { type: null, value };
}

/**
 * RFC 3464 field groups: the per-message group, then one group per recipient. MTAs that leave out the blank line between
 * recipients are split where a recipient field repeats.
 */
function deliveryStatusGroups(text: string): { message: Headers; recipients: Headers[] } {
  const message: Headers = new Map();
  const recipients: Headers[] = [];
  let current: Headers | null;
  for (const group of text.split(/\n[ \t]*\n/).slice(0, MAX_RECIPIENTS + 1)) {
    current = null;
    for (const [name, value] of orderedFields(group.trim())) {
      const recipientField = name === 'final-recipient' || name === 'original-recipient' || name === 'x-actual-recipient';
      // A recipient field opens a new group unless the fields so far (a Status or Diagnostic-Code written first) name nobody.
      const named = !!current && (current.has('final-recipient') || current.has('original-recipient'));
      if (recipientField && (!current || current.has(name) || (name !== 'x-actual-recipient' && named && current.has('status')))) {
        current = new Map();
        recipients.push(current);
      } else if (!current && (name === 'status' || name === 'action' || name === 'diagnostic-code')) {
        current = new Map();
        recipients.push(current);
      }
      const target = current ?? message;
      if (!target.has(name)) target.set(name, [value]);
    }
  }
  return { message, recipients };
}

/** Header-style fields in the order written, folded lines joined. */
function orderedFields(block: string): [string, string][] {
  const fields: [string, string][] = [];
  for (const line of block.split('\n', MAX_HEADER_LINES)) {
    const last = fields.at(-1);
    if ((line.startsWith(' ') || line.startsWith('\t')) && last) {
      if (last[1].length < 8192) last[1] += ' ' + line.trim();
      continue;
    }
    const colon = line.indexOf(':');
    if (colon < 1 || colon > 76 || !/^[!-9;-~]+$/.test(line.slice(0, colon))) continue;
    fields.push([line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]);
  }
  return fields;
}

/** Phrases that make a whole plain-text report a delay warning rather than a bounce. */
const DELAY_WARNING = new RegExp(
  [
    'this is (?:a|only a) warning',
    'warning: message .{0,80}? delayed',
    'has not (?:yet )?been delivered',
    'not been delivered yet',
    'will (?:continue|keep) (?:trying|to try|attempting)',
    'delivery status notification \\(delay\\)',
    'delivery (?:to the following recipients? )?(?:has been|is) delayed',
    'still trying to deliver',
    'you do not need to resend',
    'no action is required on your part',
    'message will be retried',
  ].join('|'),
  'i',
);

/** Blocks of a plain-text bounce: each begins at a line naming a failed recipient and runs to the next one. */
function textFindings(notice: string, exclude: Set<string>, failedHint: string[]): Finding[] {
  const lines = notice.split('\n').slice(0, 4000);
  const blocks: { address: string; lines: string[] }[] = [];
  const preamble: string[] = [];
  const wanted = new Set(failedHint.map((a) => a.toLowerCase()));
  for (const line of lines) {
    // Quoted header lines name the sender, the original To or a Message-ID, not the failed recipient.
    const headerLike = /^[>\s]*([A-Za-z][\w-]{0,40}):\s/.exec(line);
    if (headerLike && !/recipient|rcpt|^in$/i.test(headerLike[1])) {
      (blocks.at(-1)?.lines ?? preamble).push(line);
      continue;
    }
    ADDRESS.lastIndex = 0;
    let named: string | null = null;
    // Addresses are looked for in a line's head only, and only when it has an '@': MTAs name recipients early in short lines.
    for (const m of line.includes('@') ? line.slice(0, MAX_ADDRESS_LINE).matchAll(ADDRESS) : []) {
      const address = m[0].replace(/^[.'"]+|[.'"]+$/g, '').toLowerCase();
      const before = line.slice(Math.max(0, m.index - 12), m.index).toLowerCase();
      // An Authentication-Results token (smtp.mailfrom=, header.from=) names the sender, not a recipient.
      if (/(?:mailfrom|from|helo)=/.test(address)) continue;
      if (exclude.has(address) || isDaemon(address) || /mail from:?\s*<?$|from:?\s*<?$|sender:?\s*<?$|message-id:?\s*<?$|mailfrom=$/.test(before)) continue;
      if (wanted.size > 0 && !wanted.has(address)) continue;
      named = address;
      break;
    }
    const current = blocks.at(-1);
    if (named && named !== current?.address && !blocks.some((b) => b.address === named)) blocks.push({ address: named, lines: [line] });
    else if (current) current.lines.push(line);
    else preamble.push(line);
  }
  return blocks.slice(0, MAX_RECIPIENTS).map(({ address, lines: body }) => {
    const diagnostic = body.slice(0, 40).join('\n');
    return {
      recipient: address,
      action: null,
      status: null,
      replyCode: null,
      diagnostic,
      diagnosticType: null,
      remoteMta: null,
      command: findCommand(diagnostic),
      verdict: null,
    };
  });
}

/** The part of a plain-text notification above the copy of the original. */
function noticeOf(text: string): string {
  const marker = originalMarker(text);
  return marker ? text.slice(0, marker.index) : text;
}

/** The remote server's words for one recipient, from the transcript or explanation in the human-readable part. */
function textForRecipient(notice: string, noticeLower: string, recipient: string): string | null {
  const at = noticeLower.indexOf(recipient);
  if (at < 0) return null;
  const start = notice.lastIndexOf('\n', at) + 1;
  const rest = notice.slice(start, start + 4000);
  const end = rest.search(/\n[ \t]*\n[ \t]*\n|\n[ \t]*\n(?=\S[^\n]*@)/);
  return end < 0 ? rest : rest.slice(0, end);
}

/** A multi-line SMTP reply ("550-5.7.1 first line 550-5.7.1 second line") read as one sentence. */
function joinReplyLines(text: string): string {
  const m = /(?<![\d.])([245]\d\d)-(?:([245]\.\d{1,3}\.\d{1,3}) )?/.exec(text);
  if (!m) return text;
  const prefix = new RegExp(`(?<![\\d.])${m[1]}[ -](?:${(m[2] ?? 'x').replace(/\./g, '\\.')} )?`, 'g');
  return `${m[1]} ${m[2] ? m[2] + ' ' : ''}${text.replace(prefix, '')}`.replace(/\s+/g, ' ').trim();
}

function outcome(f: Finding, reportText: string): RecipientOutcome {
  const diagnostic = joinReplyLines(unfold(f.diagnostic));
  let status = f.status;
  const inText = findEnhancedStatus(diagnostic);
  const reply = f.replyCode ?? findReplyCode(diagnostic, null);
  // Prefer the code in the server's own words when the Status field is a generic X.0.0 or disagrees with the reply's class.
  // A transcript in a plain-text bounce holds the 2xx answers before the failure too: a failure's code is preferred.
  if (!status) status = (inText?.startsWith('2.') ? (findEnhancedStatus(diagnostic, '5') ?? findEnhancedStatus(diagnostic, '4')) : null) ?? inText ?? null;
  else if (inText) {
    // 4.4.7 (expired) and 5.3.x (mail system) are what an MTA writes when it gives up; the server's own code says why,
    // as does a code an MTA quotes after its own generic X.Y.0.
    const quoted = findEnhancedStatus(diagnostic, undefined, status);
    if ((status === '4.4.7' || status.startsWith('5.3.')) && quoted) status = quoted;
    else if (inText === status) status = inText;
    else if (/\.0\.0$/.test(status) && inText[0] === status[0]) {
      // SES writes its own 5.1.0 before the remote server's code.
      status = (inText.endsWith('.0') && findEnhancedStatus(diagnostic, status[0], inText)) || inText;
    } else if (reply && reply[0] !== status[0] && reply[0] === inText[0]) status = inText;
    // The remote server's own code, beside its reply, over the MTA's summary in the Status field.
    else if (f.diagnosticType === 'smtp' && reply && inText[0] === status[0] && new RegExp(`${reply}[ -]#?${inText.replace(/\./g, '\\.')}`).test(diagnostic)) {
      status = inText;
    }
  }
  const replyCode = reply && (!status || reply[0] === status[0]) ? reply : null;
  const action = f.action ?? (status?.startsWith('2') ? 'delivered' : 'failed');
  const reason = decideReason({
    status,
    replyCode,
    text: diagnostic || (f.diagnosticType ? '' : reportText.slice(0, 4096)),
    command: f.command ?? findCommand(diagnostic),
    action,
    diagnosticType: f.diagnosticType,
    mtaVerdict: f.verdict,
  });
  return {
    recipient: f.recipient,
    action,
    status,
    replyCode,
    diagnosticCode: diagnostic ? diagnostic.slice(0, MAX_DIAGNOSTIC) : null,
    remoteMta: f.remoteMta,
    reason,
    bounceType: bounceTypeOf(reason, status, replyCode, diagnostic),
    subType: subTypeOf(reason),
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// Complaints and auto-replies

function complaintFrom(fields: Headers, original: OriginalMessage, recipientsHint: string[]): InboundReport {
  const recipients = [...(fields.get('original-rcpt-to') ?? []), ...(fields.get('removal-recipient') ?? []), ...recipientsHint]
    .map((v) => firstAddress(v)?.toLowerCase())
    .filter((v): v is string => !!v);
  // Most feedback loops redact or omit Original-Rcpt-To; the To of the reported message is who complained.
  if (recipients.length === 0 && original.to) recipients.push(original.to);
  const unique = [...new Set(recipients)].slice(0, MAX_RECIPIENTS);
  return {
    kind: 'complaint',
    feedbackType: (header(fields, 'feedback-type') ?? 'abuse').toLowerCase(),
    userAgent: header(fields, 'user-agent'),
    recipient: unique[0] ?? null,
    recipients: unique,
    sourceIp: header(fields, 'source-ip'),
    arrivalDate: header(fields, 'arrival-date') ?? header(fields, 'received-date'),
    original,
  };
}

const AUTO_REPLY_SUBJECT = new RegExp(
  '^(?:auto(?:matic|matische)?[ -]?(?:reply|response|antwort|respuesta|risposta)|autoreply|auto:|out of (?:the )?office|away from' +
    '|away until|on vacation|vacation|abwesenheit|absence|réponse automatique|fuera de la oficina|ausente)',
  'i',
);

function autoReplyReason(top: Headers, subject: string, body: string): string | null {
  const submitted = (header(top, 'auto-submitted') ?? '').toLowerCase();
  if (submitted.startsWith('auto-replied')) return `Auto-Submitted: ${submitted}`;
  for (const name of ['x-autoreply', 'x-autorespond', 'x-autoresponder', 'x-vacation', 'x-auto-response-suppress-reply']) {
    if (top.has(name)) return `${name} header`;
  }
  const precedence = (header(top, 'precedence') ?? '').toLowerCase();
  if (precedence === 'auto_reply') return 'Precedence: auto_reply';
  if (AUTO_REPLY_SUBJECT.test(subject.trim())) return `subject: ${subject.trim().slice(0, 80)}`;
  if (/i am (?:away|out of the office|on vacation|traveling)|i will be (?:out|away|back)|out of (?:the )?office until/i.test(body.slice(0, 4096))) {
    return 'vacation text';
  }
  return null;
}

/** Is a report with no RFC 3464 part still a bounce? The sender or the subject say so. */
const BOUNCE_SUBJECT = new RegExp(
  [
    'undeliver',
    'delivery (?:status notification|failure|failed|has failed|problem|notification)',
    'failure notice',
    'returned mail',
    'returning message',
    'mail delivery',
    'could not be delivered',
    'not delivered',
    'nondeliverable',
    'non-delivery',
    'delivery report',
    'rejected',
    'mail system error',
    'delivery problem',
    'permanent error',
    'warning: could not send',
    'bounce',
    'nicht zustellbar',
    'message status',
  ].join('|'),
  'i',
);

/** Sentences of plain-text bounces whose sender and subject do not say so (KDDI, Verizon, Apache James, X1). */
const BOUNCE_TEXT = new RegExp(
  [
    'could not be delivered to: ',
    'error: invalid user address',
    'the following addresses had (?:delivery|permanent fatal) errors',
    'unable to deliver message to',
    'delivery failed for the following reason',
    'the following recipients? (?:could not|cannot) be reached',
  ].join('|'),
);

/**
 * fml (a mailing-list manager) answers a post it refuses to the poster: not a member, or a loop. The poster's address is
 * the report's To; the refusal is never permanent for that address.
 */
function mailingListRefusal(top: Headers, subject: string): Finding | null {
  if (!/^fml /i.test(header(top, 'x-mlserver') ?? '')) return null;
  const verdict: BounceReason | null = /are not (?:a )?member/i.test(subject) ? 'rejected' : /loop alert/i.test(subject) ? 'systemerror' : null;
  const recipient = firstAddress(header(top, 'to'))?.toLowerCase() ?? null;
  if (!verdict || !recipient) return null;
  return {
    recipient,
    action: 'failed',
    status: null,
    replyCode: null,
    diagnostic: subject.slice(0, 200),
    diagnosticType: null,
    remoteMta: null,
    command: null,
    verdict,
  };
}

const BOUNCE_SENDER = /^(?:mailer-daemon|post_?master|mail-daemon|maildaemon|mail delivery|mmdf|smtp|mailer|mail\.daemon|microsoftexchange|nobody)/i;

// ---------------------------------------------------------------------------------------------------------------------

export async function parseInboundReport(raw: Buffer): Promise<InboundReport> {
  try {
    return cleaned(readReport(raw));
  } catch (error) {
    return { kind: 'unknown', why: `unreadable: ${error instanceof Error ? error.message.slice(0, 200) : 'error'}` };
  }
}

/** Control characters (NUL above all: PostgreSQL refuses it in text and jsonb) are dropped from every string of the report. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g;
function cleaned<T>(value: T): T {
  if (typeof value === 'string') return value.replace(CONTROL, '') as T;
  if (Array.isArray(value)) return value.map(cleaned) as T;
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, cleaned(v)])) as T;
  return value;
}

/** `nested`: this is a report found inside another (a relay returned a DSN wrapped in its own notice). */
function readReport(raw: Buffer, nested = false): InboundReport {
  const read = readMessage(raw);
  if ('unreadable' in read) return { kind: 'unknown', why: read.unreadable };
  const { top, subject, fromHeader, feedback, wrapped, texts } = read;
  let { originalHeaders, deliveryStatus } = read;
  const text = texts.join('\n').slice(0, MAX_TEXT);
  // The returned "original" is itself a delivery report, and this notice says nothing of its own: read that one.
  if (wrapped && !nested && deliveryStatus === null && feedback === null) {
    const inner = readReport(Buffer.from(wrapped, 'latin1'), true);
    if (inner.kind === 'bounce' || inner.kind === 'delay') return inner;
  }
  originalHeaders ??= quotedOriginalHeaders(text);
  const original = originalFrom(originalHeaders, top.headers);

  // Amazon SES notifications delivered by SNS email: a JSON document in a text/plain body.
  const ses = sesNotification(text, original);
  if (ses) return ses;

  if (feedback !== null) {
    return complaintFrom(parseHeaders(feedback.replace(/^\s+/, '')), original, []);
  }
  const jmrp = nonArfComplaint(top.headers, subject, originalHeaders);
  if (jmrp) return { ...jmrp, original };

  // Some MTAs write the RFC 3464 fields into the text itself instead of a message/delivery-status part.
  if (deliveryStatus === null) {
    const inline = /^(?:reporting-mta|final-recipient)\s*:/im.exec(text);
    if (inline) {
      deliveryStatus = text.slice(inline.index);
      texts.splice(0, texts.length, text.slice(0, inline.index));
    }
  }
  const reportingMta = (h: Headers | null) => typed(h ? header(h, 'reporting-mta') : null).value.trim() || null;
  const notice = noticeOf(texts.join('\n'));

  if (deliveryStatus !== null) {
    const groups = deliveryStatusGroups(deliveryStatus);
    const noticeLower = notice.toLowerCase();
    const findings = groups.recipients.slice(0, MAX_RECIPIENTS).map((fields): Finding => {
      const finalRecipient = firstAddress(typed(header(fields, 'final-recipient')).value);
      const recipient =
        (
          finalRecipient ??
          firstAddress(typed(header(fields, 'original-recipient')).value) ??
          firstAddress(typed(header(fields, 'x-actual-recipient')).value)
        )?.toLowerCase() ?? null;
      const diag = typed(header(fields, 'diagnostic-code'));
      const fromText = recipient && !diag.value.trim() ? textForRecipient(notice, noticeLower, recipient) : null;
      const statusField = /([245])\.(\d{1,3})\.(\d{1,3})/.exec(header(fields, 'status') ?? '');
      return {
        recipient,
        action: normaliseAction(header(fields, 'action')),
        status: statusField ? `${statusField[1]}.${statusField[2]}.${statusField[3]}` : null,
        replyCode: null,
        diagnostic: diag.value || fromText || '',
        diagnosticType: diag.value ? (diag.type ?? 'smtp') : null,
        remoteMta: typed(header(fields, 'remote-mta')).value.trim() || null,
        command: findCommand(fromText ?? notice),
        verdict: null,
      };
    });
    // A Final-Recipient without a usable address ("rfc822; @host") leaves the human-readable part or the original's To to name it.
    const unnamed = findings.filter((f) => !f.recipient);
    if (unnamed.length > 0) {
      const named = new Set(findings.map((f) => f.recipient));
      const fromText = textFindings(notice, new Set(), [])
        .map((f) => f.recipient)
        .filter((r) => r && !named.has(r));
      for (const f of unnamed) f.recipient = fromText.shift() ?? original.to;
    }
    if (findings.length > 0) return reportOf(findings, reportingMta(groups.message), original, notice);
  }

  const refusal = mailingListRefusal(top.headers, subject);
  if (refusal) return reportOf([refusal], null, original, notice);
  const looksLikeBounce =
    BOUNCE_SENDER.test(fromHeader.replace(/^.*</, '').replace(/^"/, '')) ||
    BOUNCE_SUBJECT.test(subject) ||
    top.headers.has('x-failed-recipients') ||
    BOUNCE_TEXT.test(notice.slice(0, 16 * 1024).toLowerCase());
  if (looksLikeBounce) {
    const exclude = new Set(
      [header(top.headers, 'to'), header(top.headers, 'from'), header(top.headers, 'delivered-to'), original.from, original.returnPath]
        .map((v) => firstAddress(v)?.toLowerCase())
        .filter((v): v is string => !!v),
    );
    const failedHint = (top.headers.get('x-failed-recipients') ?? [])
      .flatMap((v) => v.split(','))
      .map((v) => v.trim())
      .filter(Boolean);
    let findings = textFindings(notice, exclude, failedHint);
    if (findings.length === 0 && failedHint.length > 0) findings = textFindings(notice, exclude, []);
    // A message sent to oneself bounces to the failed address: look again without leaving out the report's own To.
    if (findings.length === 0) findings = textFindings(notice, new Set(), failedHint);
    // Exim names a failed recipient by its local part alone when the domain was its own; X-Failed-Recipients names it in full.
    const named = failedHint.map((v) => firstAddress(v)?.toLowerCase()).find((v) => !!v) ?? original.to;
    if (findings.length === 0 && named) {
      findings = [
        {
          recipient: named,
          action: null,
          status: null,
          replyCode: null,
          diagnostic: notice.slice(0, 4000),
          diagnosticType: null,
          remoteMta: null,
          command: findCommand(notice),
          verdict: null,
        },
      ];
    }
    if (findings.length > 0) {
      const delayed = DELAY_WARNING.test(notice.slice(0, 16 * 1024)) || /\(delay\)|delayed|warning/i.test(subject);
      for (const f of findings) f.action = delayed ? 'delayed' : null;
      return reportOf(findings, null, original, notice);
    }
  }

  const why = autoReplyReason(top.headers, subject, text);
  if (why) return { kind: 'auto-reply', why, original: originalFrom(null, top.headers) };
  return { kind: 'unknown', why: 'neither a delivery report, a complaint nor an auto-reply' };
}

function reportOf(findings: Finding[], reportingMta: string | null, original: OriginalMessage, notice: string): InboundReport {
  // One outcome per address: some MTAs repeat a recipient (once per attempt, or per MX); the first says it.
  const seen = new Set<string>();
  const unique = findings.filter((f) => !f.recipient || (!seen.has(f.recipient) && !!seen.add(f.recipient)));
  const recipients = unique.map((f) => outcome(f, notice));
  if (recipients.some((r) => r.action === 'failed')) return { kind: 'bounce', reportingMta, recipients, original };
  if (recipients.some((r) => r.action === 'delayed')) return { kind: 'delay', reportingMta, recipients, original };
  return { kind: 'unknown', why: 'a delivery report with no failed or delayed recipient (delivered, relayed or expanded)' };
}

/** Hotmail's JMRP and Apple Mail's one-click unsubscribe: complaints that are not ARF. */
function nonArfComplaint(top: Headers, subject: string, original: Headers | null): Omit<Extract<InboundReport, { kind: 'complaint' }>, 'original'> | null {
  const hotmail = original && header(original, 'x-hmxmroriginalrecipient');
  if (hotmail || /^complaint about message from/i.test(subject.trim())) {
    const recipient = firstAddress(hotmail ?? (original && header(original, 'to')))?.toLowerCase() ?? null;
    return {
      kind: 'complaint',
      feedbackType: 'abuse',
      userAgent: null,
      recipient,
      recipients: recipient ? [recipient] : [],
      sourceIp: original ? (header(original, 'x-reporter-ip') ?? header(original, 'x-sid-pra')) : null,
      arrivalDate: null,
    };
  }
  if ((header(top, 'x-apple-unsubscribe') ?? '').toLowerCase() === 'true') {
    const recipient = firstAddress(header(top, 'from'))?.toLowerCase() ?? null;
    return {
      kind: 'complaint',
      feedbackType: 'opt-out',
      userAgent: 'Apple Mail',
      recipient,
      recipients: recipient ? [recipient] : [],
      sourceIp: null,
      arrivalDate: header(top, 'date'),
    };
  }
  return null;
}

interface SesRecipient {
  emailAddress?: string;
  action?: string;
  status?: string;
  diagnosticCode?: string;
}

/** Amazon SES Bounce/Complaint/Delivery notifications, as SNS delivers them by email. */
function sesNotification(text: string, fallback: OriginalMessage): InboundReport | null {
  const open = text.indexOf('{');
  if (open < 0 || !/"notificationType|\\"notificationType/.test(text.slice(0, 64 * 1024))) return null;
  const close = text.lastIndexOf('}');
  let doc: {
    /** An SNS envelope ("Type": "Notification") carries the SES document as a JSON string. */
    Type?: string;
    Message?: unknown;
    notificationType?: string;
    bounce?: { bouncedRecipients?: SesRecipient[]; bounceType?: string; reportingMTA?: string; remoteMtaIp?: string };
    complaint?: { complainedRecipients?: SesRecipient[]; complaintFeedbackType?: string; userAgent?: string; arrivalDate?: string; timestamp?: string };
    mail?: {
      messageId?: string;
      source?: string;
      sourceIp?: string;
      destination?: string[];
      commonHeaders?: { from?: string[]; to?: string[]; messageId?: string };
    };
  };
  try {
    doc = JSON.parse(text.slice(open, close + 1));
  } catch {
    try {
      // SNS email folds long JSON lines; the folds are not part of the document.
      doc = JSON.parse(text.slice(open, close + 1).replace(/\n/g, ''));
    } catch {
      return null;
    }
  }
  if (typeof doc?.Message === 'string') {
    try {
      doc = JSON.parse(doc.Message);
    } catch {
      return null;
    }
  }
  if (!doc || typeof doc !== 'object') return null;
  const mail = doc.mail ?? {};
  const original: OriginalMessage = {
    messageId: messageIdOf(mail.commonHeaders?.messageId ?? null) ?? fallback.messageId,
    returnPath: mail.source?.toLowerCase() ?? fallback.returnPath,
    from: firstAddress(mail.commonHeaders?.from?.[0])?.toLowerCase() ?? fallback.from,
    to: firstAddress(mail.commonHeaders?.to?.[0] ?? mail.destination?.[0])?.toLowerCase() ?? fallback.to,
  };
  const type = (doc.notificationType ?? '').toLowerCase();
  if (type === 'complaint' && doc.complaint) {
    const recipients = (doc.complaint.complainedRecipients ?? []).map((r) => r.emailAddress?.toLowerCase()).filter((v): v is string => !!v);
    return {
      kind: 'complaint',
      feedbackType: (doc.complaint.complaintFeedbackType ?? 'abuse').toLowerCase(),
      userAgent: doc.complaint.userAgent ?? null,
      recipient: recipients[0] ?? null,
      recipients,
      sourceIp: mail.sourceIp ?? null,
      arrivalDate: doc.complaint.arrivalDate ?? doc.complaint.timestamp ?? null,
      original,
    };
  }
  if (type === 'bounce' && doc.bounce) {
    const findings = (doc.bounce.bouncedRecipients ?? []).slice(0, MAX_RECIPIENTS).map((r): Finding => {
      const diag = typed(r.diagnosticCode ?? null);
      return {
        recipient: r.emailAddress?.toLowerCase() ?? null,
        action: normaliseAction(r.action) ?? 'failed',
        status: r.status ?? null,
        replyCode: null,
        diagnostic: diag.value,
        diagnosticType: diag.value ? (diag.type ?? 'smtp') : null,
        remoteMta: doc.bounce?.remoteMtaIp ?? null,
        command: null,
        verdict: null,
      };
    });
    return reportOf(findings, doc.bounce.reportingMTA ?? null, original, '');
  }
  if (type === 'delivery') return { kind: 'unknown', why: 'an Amazon SES delivery notification' };
  return null;
}
