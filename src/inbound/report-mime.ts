/**
 * Reading a returned message: its MIME structure, headers, transfer and charset encodings and text, bounded per message
 * (`readMessage`). bounce-report.ts decides what the message says; this only reads it.
 */

/** Only the head of a message is read: the report is at the top, a large returned original at the bottom does not matter. */
export const MAX_MESSAGE_BYTES = 1024 * 1024;

/** Free text any pattern runs over is cut to this. */
export const MAX_TEXT = 256 * 1024;
/** All the parts of one message together yield at most this much text: the work is bounded per message, not per part. */
export const MAX_MESSAGE_TEXT = 512 * 1024;
const MAX_DEPTH = 8;
const MAX_PARTS = 128;
export const MAX_HEADER_LINES = 400;

// Not mailparser (which received-message.ts uses for mail from people): it flattens multipart/report into "text" plus
// "attachments" and drops which part said what, and a report needs the parts as the MTA laid them out; on sisimai's corpus
// its simpleParser alone took longer than this whole reader (docs/architecture.md, the inbound path). So this reads the
// structure itself, with hard limits on depth, part count, header lines and text.

export type Headers = Map<string, string[]>;

export interface Entity {
  headers: Headers;
  type: string;
  params: Record<string, string>;
  /** Body as a binary (latin1) string, transfer encoding not yet undone. */
  body: string;
  parts: Entity[];
}

export function parseHeaders(block: string): Headers {
  const headers: Headers = new Map();
  const lines = block.split('\n', MAX_HEADER_LINES);
  let current: [string, string] | null = null;
  const flush = () => {
    if (!current) return;
    const list = headers.get(current[0]) ?? [];
    list.push(current[1].trim());
    headers.set(current[0], list);
  };
  for (const line of lines) {
    if ((line.startsWith(' ') || line.startsWith('\t')) && current) {
      if (current[1].length < 8192) current[1] += ' ' + line.trim();
      continue;
    }
    const colon = line.indexOf(':');
    if (colon < 1 || colon > 76 || !/^[!-9;-~]+$/.test(line.slice(0, colon))) continue;
    flush();
    current = [line.slice(0, colon).toLowerCase(), line.slice(colon + 1)];
  }
  flush();
  return headers;
}

export const header = (h: Headers, name: string): string | null => h.get(name)?.[0] ?? null;

/** Does the text open with a header block (so it can be split into header and body)? */
export const startsWithHeader = (text: string) => /^[!-9;-~]{1,76}:/.test(text);

export function splitEntity(text: string): { head: string; body: string } {
  if (!startsWithHeader(text)) return { head: '', body: text };
  const end = text.indexOf('\n\n');
  return end < 0 ? { head: text, body: '' } : { head: text.slice(0, end), body: text.slice(end + 2) };
}

function parseContentType(value: string | null): { type: string; params: Record<string, string> } {
  if (!value) return { type: 'text/plain', params: {} };
  const [first, ...rest] = value.split(';');
  const params: Record<string, string> = {};
  for (const piece of rest.slice(0, 20)) {
    const eq = piece.indexOf('=');
    if (eq < 0) continue;
    params[piece.slice(0, eq).trim().toLowerCase()] = piece
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1');
  }
  // A parameter folded onto the next line without its ';' leaves the type as the first word.
  return { type: first.trim().split(/\s/, 1)[0].toLowerCase() || 'text/plain', params };
}

export function parseEntity(text: string, depth: number, budget: { parts: number }): Entity {
  const { head, body } = splitEntity(text);
  const headers = parseHeaders(head);
  const { type, params } = parseContentType(header(headers, 'content-type'));
  // Some MTAs write the boundary parameter on a line of its own, unfolded.
  if (type.startsWith('multipart/') && !params.boundary) {
    const loose = /^[ \t]*boundary="?([^"\n;]{1,200})"?/im.exec(head);
    if (loose) params.boundary = loose[1].trim();
  }
  const entity: Entity = { headers, type, params, body, parts: [] };
  if (!type.startsWith('multipart/') || !params.boundary || depth >= MAX_DEPTH) return entity;
  const delimiter = '\n--' + params.boundary;
  let at = ('\n' + body).indexOf(delimiter);
  if (at < 0) return entity;
  const padded = '\n' + body;
  while (at >= 0 && budget.parts < MAX_PARTS) {
    const lineEnd = padded.indexOf('\n', at + 1);
    if (padded.startsWith('--', at + delimiter.length) || lineEnd < 0) break;
    const next = padded.indexOf(delimiter, lineEnd);
    const chunk = padded.slice(lineEnd + 1, next < 0 ? undefined : next);
    budget.parts += 1;
    entity.parts.push(parseEntity(chunk, depth + 1, budget));
    at = next;
  }
  return entity;
}

function decodeQuotedPrintable(text: string): string {
  return text.replace(/=\n/g, '').replace(/=([0-9A-Fa-f]{2})/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/** Bytes (as a binary string) to text in the named charset; unknown charsets and invalid UTF-8 fall back to Latin-1. */
export function decodeCharset(binary: string, charset: string | undefined): string {
  const bytes = Buffer.from(binary, 'latin1');
  const label = (charset ?? 'utf-8').toLowerCase();
  try {
    if (label === 'us-ascii' || label === 'utf-8' || label === 'utf8') return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    return new TextDecoder(label).decode(bytes);
  } catch {
    return bytes.toString('latin1');
  }
}

/** What is left of the message's text allowance (MAX_MESSAGE_TEXT); each part's text is taken from it. */
export interface TextBudget {
  left: number;
}

export function bodyText(entity: Entity, budget: TextBudget): string {
  if (budget.left <= 0) return '';
  const encoding = (header(entity.headers, 'content-transfer-encoding') ?? '').toLowerCase();
  let binary = entity.body.slice(0, Math.min(MAX_TEXT, budget.left) * 2);
  if (encoding.includes('base64')) binary = Buffer.from(binary.replace(/[^A-Za-z0-9+/=]/g, ''), 'base64').toString('latin1');
  else if (encoding.includes('quoted-printable')) binary = decodeQuotedPrintable(binary);
  const text = decodeCharset(binary, entity.params.charset).slice(0, Math.min(MAX_TEXT, budget.left));
  budget.left -= Math.max(1, text.length);
  return text;
}

/** RFC 2047 encoded words in a header value (Subject of an auto-reply is often one). */
export function decodeWords(value: string): string {
  return value.slice(0, 4096).replace(/=\?([^?\s]{1,40})\?([BbQq])\?([^?\s]{0,2000})\?=\s*/g, (_m, charset: string, kind: string, data: string) => {
    const binary = kind.toUpperCase() === 'B' ? Buffer.from(data, 'base64').toString('latin1') : decodeQuotedPrintable(data.replace(/_/g, ' '));
    return decodeCharset(binary, charset);
  });
}

export function leaves(entity: Entity, out: Entity[] = []): Entity[] {
  if (entity.parts.length === 0) out.push(entity);
  for (const part of entity.parts) leaves(part, out);
  return out;
}

/** Tags that end a line of the text a reader sees. */
const LINE_BREAK_TAG = /^<\/?(?:br|p|div|tr|h\d)\b/i;

/**
 * The words of an HTML part: each tag (from '<' to the next '>') becomes a space, or a line break for a block's end.
 * A scan that never looks at a character twice: a '<' with no '>' after it is text.
 */
export function htmlToText(html: string): string {
  const out: string[] = [];
  let at = 0;
  let nextClose = -1;
  while (at < html.length) {
    const open = html.indexOf('<', at);
    if (open < 0) break;
    if (nextClose < open) nextClose = html.indexOf('>', open);
    if (nextClose < 0) break;
    out.push(html.slice(at, open), LINE_BREAK_TAG.test(html.slice(open, open + 8)) ? '\n' : ' ');
    at = nextClose + 1;
  }
  out.push(html.slice(at));
  return out
    .join('')
    .replace(/&nbsp;/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** A returned message as read: the parts a report is made of, each as text, in the order the MTA wrote them. */
export interface ReadMessage {
  top: Entity;
  /** Subject, its encoded words decoded. */
  subject: string;
  fromHeader: string;
  /** The first message/delivery-status part (RFC 3464), if any. */
  deliveryStatus: string | null;
  /** The first message/feedback-report part (ARF), if any. */
  feedback: string | null;
  /** The returned original's header block, when a part carries it. */
  originalHeaders: Headers | null;
  /** The returned original, when it is itself a multipart/report (a relay's notice around a DSN). */
  wrapped: string | null;
  /** The human-readable parts (HTML as its words) and a body with no parts. */
  texts: string[];
}

/** Reads the head of a returned message (MAX_MESSAGE_BYTES); all its parts together yield at most MAX_MESSAGE_TEXT of text. */
export function readMessage(raw: Buffer): ReadMessage | { unreadable: string } {
  if (!Buffer.isBuffer(raw) || raw.length === 0) return { unreadable: 'empty message' };
  // An mbox "From " separator line is not part of the message.
  const binary = raw
    .subarray(0, MAX_MESSAGE_BYTES)
    .toString('latin1')
    .replace(/\r\n?/g, '\n')
    .replace(/\0/g, '')
    .replace(/^From [^\n]*\n/, '');
  if (!startsWithHeader(binary)) return { unreadable: 'no header block' };
  const top = parseEntity(binary, 0, { parts: 0 });
  const parts = leaves(top);
  const subject = decodeWords(header(top.headers, 'subject') ?? '');
  const fromHeader = header(top.headers, 'from') ?? '';

  let originalHeaders: Headers | null = null;
  let deliveryStatus: string | null = null;
  let feedback: string | null = null;
  const texts: string[] = [];
  let wrapped: string | null = null;
  const budget: TextBudget = { left: MAX_MESSAGE_TEXT };
  for (const part of parts) {
    if (part.type === 'message/delivery-status' || part.type === 'message/global-delivery-status' || part.type === 'text/delivery-status') {
      deliveryStatus ??= bodyText(part, budget);
    } else if (part.type === 'message/feedback-report') {
      feedback ??= bodyText(part, budget);
    } else if (/^(?:message\/rfc822|text\/rfc822-headers|message\/rfc822-headers|message\/global|message\/global-headers)$/.test(part.type)) {
      if (!originalHeaders) {
        const inner = bodyText(part, budget);
        const candidate = parseHeaders(splitEntity(inner.replace(/^\s+/, '')).head);
        if (candidate.size > 0) originalHeaders = candidate;
        if (/^multipart\/report\b/i.test(header(candidate, 'content-type') ?? '')) wrapped = inner.replace(/^\s+/, '');
      }
    } else if (part.type === 'text/plain' || part.type === 'text/html' || part === top) {
      const text = bodyText(part, budget);
      texts.push(part.type === 'text/html' ? htmlToText(text) : text);
    }
  }
  return { top, subject, fromHeader, deliveryStatus, feedback, originalHeaders, wrapped, texts };
}
