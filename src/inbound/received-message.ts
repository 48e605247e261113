import { type AddressObject, simpleParser } from 'mailparser';

/** Header lines kept per message, and the length of each value: a message of a million tiny headers stays small. */
const MAX_HEADERS = 500;
const MAX_HEADER_VALUE = 8 * 1024;
const MAX_ADDRESSES = 100;
/** Message-IDs read from In-Reply-To and References to find the email answered. */
const MAX_ANSWERED_IDS = 100;
const MAX_SUBJECT = 2000;

/** A received message as read off the main thread: every string already free of NUL and well-formed. */
export interface ReceivedMessage {
  /** The From: address (lower-case), else null. */
  from: string | null;
  to: string[];
  cc: string[];
  subject: string;
  text: string | null;
  html: string | null;
  headers: Array<{ name: string; value: string }>;
  attachments: Array<{ filename: string | null; contentType: string; size: number }>;
  messageId: string | null;
  /** Message-IDs from In-Reply-To, then References (most recent first). */
  answers: string[];
}

/** PostgreSQL refuses NUL in text and jsonb, and a lone surrogate in jsonb: both are cleaned from everything stored. */
// eslint-disable-next-line no-control-regex -- NUL is the point
export const storable = (s: string) => s.replace(/\u0000/g, '').toWellFormed();

function addresses(field: AddressObject | AddressObject[] | undefined): string[] {
  const out: string[] = [];
  const visit = (values: AddressObject['value']) => {
    for (const v of values) {
      if (out.length >= MAX_ADDRESSES) return;
      if (v.group) visit(v.group);
      else if (v.address) out.push(storable(v.address).toLowerCase().slice(0, 320));
    }
  };
  for (const f of field === undefined ? [] : Array.isArray(field) ? field : [field]) visit(f.value);
  return out;
}

/** `<...>` tokens, left to right; a bounded class with no nesting, so the scan is linear. */
const messageIds = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join(' ') : (v ?? '')).match(/<[^<>\s]{1,900}>/g)?.map(storable) ?? [];

/**
 * A received message read with mailparser (on a report thread: a large or hostile message never holds the event loop):
 * addresses, subject, bodies, header lines and attachment metadata, every string cleaned for PostgreSQL.
 */
export async function readReceivedMessage(raw: Buffer): Promise<ReceivedMessage> {
  const m = await simpleParser(raw, { skipImageLinks: true, skipTextLinks: true, skipTextToHtml: true, keepCidLinks: true });
  const from = addresses(m.from)[0] ?? null;
  const headers = m.headerLines.slice(0, MAX_HEADERS).map((h) => {
    const colon = h.line.indexOf(':');
    const name = storable(colon > 0 ? h.line.slice(0, colon) : h.key)
      .trim()
      .slice(0, 200);
    // Unfolded: each line break before white space removed (RFC 5322 §2.2.3).
    const value = storable(colon > 0 ? h.line.slice(colon + 1) : '')
      .replace(/\r?\n(?=[ \t])/g, '')
      .trim()
      .slice(0, MAX_HEADER_VALUE);
    return { name, value };
  });
  const references = messageIds(m.references).reverse();
  return {
    from,
    to: addresses(m.to),
    cc: addresses(m.cc),
    subject: storable(m.subject ?? '').slice(0, MAX_SUBJECT),
    text: typeof m.text === 'string' ? storable(m.text) : null,
    html: typeof m.html === 'string' ? storable(m.html) : null,
    headers,
    attachments: m.attachments.map((a) => ({
      filename: a.filename ? storable(a.filename).slice(0, 500) : null,
      contentType: storable(a.contentType ?? 'application/octet-stream').slice(0, 200),
      size: a.size ?? a.content?.length ?? 0,
    })),
    messageId: m.messageId ? storable(m.messageId).slice(0, 900) : null,
    answers: [...new Set([...messageIds(m.inReplyTo), ...references])].slice(0, MAX_ANSWERED_IDS),
  };
}
