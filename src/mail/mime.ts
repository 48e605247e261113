import crypto from 'node:crypto';
import { domainToASCII } from 'node:url';
import * as mimeFuncs from 'nodemailer/lib/mime-funcs';
import * as qp from 'nodemailer/lib/qp';
import { type DkimKey, dkimSignature } from './dkim';

export interface MessageAttachment {
  filename: string;
  contentType: string;
  content: Buffer;
  disposition: 'attachment' | 'inline';
  contentId: string | null;
}

/** One email as the dispatcher hands it over: everything rendered, nothing encoded yet. */
export interface OutgoingMessage {
  /** With its angle brackets. */
  messageId: string;
  from: { name: string | null; address: string };
  to: { name: string | null; address: string };
  replyTo: string;
  subject: string;
  text: string | null;
  /** Null for a text-only message (one submitted over SMTP without HTML). */
  html: string | null;
  /** Validated upstream: printable names, no line breaks, none of the headers built here. */
  headers: Record<string, string>;
  attachments: MessageAttachment[];
  /** The envelope sender when it is not the From address: a per-message return path (bounces come back to it). */
  returnPath?: string;
}

/** A message ready for SMTP: its envelope and its bytes, DKIM-signed when a key was given. */
export interface EncodedMessage {
  envelope: { from: string; to: string[] };
  raw: Buffer;
}

interface Part {
  headers: Array<[string, string]>;
  body: string;
}

const ASCII_PRINTABLE_LINES = /^[\x20-\x7e\t\r\n]*$/;
const LONG_LINE = /[^\r\n]{77}/;
const crlf = (s: string) => s.replace(/\r\n|\r|\n/g, '\r\n');

/** Text as 7bit when it is short-lined ASCII (as it is), else quoted-printable: what nodemailer chooses too. */
function textPart(content: string, subtype: 'plain' | 'html'): Part {
  const body = crlf(content);
  const plain = ASCII_PRINTABLE_LINES.test(body) && !LONG_LINE.test(body);
  return {
    headers: [
      ['Content-Type', `text/${subtype}; charset=utf-8`],
      ['Content-Transfer-Encoding', plain ? '7bit' : 'quoted-printable'],
    ],
    body: plain ? body : qp.wrap(qp.encode(body), 76),
  };
}

/** Inline parts are those the HTML can reference by their Content-ID; any other part is attached. */
const isInline = (a: MessageAttachment) => a.disposition === 'inline' && Boolean(a.contentId);

function attachmentPart(a: MessageAttachment): Part {
  const inline = isInline(a);
  const headers: Array<[string, string]> = [
    ['Content-Type', mimeFuncs.buildHeaderValue({ value: a.contentType, params: { name: a.filename } })],
    ['Content-Transfer-Encoding', 'base64'],
    ['Content-Disposition', mimeFuncs.buildHeaderValue({ value: inline ? 'inline' : 'attachment', params: { filename: a.filename } })],
  ];
  if (inline) headers.push(['Content-ID', `<${a.contentId}>`]);
  return { headers, body: a.content.toString('base64').replace(/.{76}/g, '$&\r\n').replace(/\r\n$/, '') };
}

function multipart(subtype: 'alternative' | 'related' | 'mixed', parts: Part[]): Part {
  const boundary = `--_postbox_${subtype}_${crypto.randomBytes(12).toString('hex')}`;
  let body = '';
  for (const p of parts) body += `--${boundary}\r\n${headerBlock(foldAll(p.headers))}\r\n${p.body}\r\n`;
  return { headers: [['Content-Type', `multipart/${subtype}; boundary="${boundary}"`]], body: `${body}--${boundary}--\r\n` };
}

/** Folded header lines joined, each with its CRLF. */
function headerBlock(folded: Array<[string, string]>): string {
  let out = '';
  for (const [name, value] of folded) out += `${name}: ${value}\r\n`;
  return out;
}

/** Each value folded at spaces so lines stay within 78 characters where it allows (a value without spaces stays whole: it is under 998). */
const foldAll = (headers: Array<[string, string]>) => headers.map(([name, value]): [string, string] => [name, fold(name, value)]);

function fold(name: string, value: string): string {
  let line = `${name}: ${value}`;
  let out = '';
  for (let min = name.length + 2; line.length > 78; min = 1) {
    let at = line.lastIndexOf(' ', 78);
    if (at < min) at = line.indexOf(' ', 79);
    if (at === -1) break;
    out += line.slice(0, at) + '\r\n';
    line = line.slice(at);
  }
  return (out + line).slice(name.length + 2);
}

/**
 * Text a header may carry as it is. nodemailer counts CR and LF as plain, but written out they would end
 * the header line (a second From:), so text with them is encoded too, whatever validated it upstream.
 */
const hasLineBreak = (value: string) => /[\r\n]/.test(value);
const plainText = (value: string) => mimeFuncs.isPlainText(value) && !hasLineBreak(value);

/** A header value as written: encoded-words where it is not plain ASCII (all of it when it holds a line break). */
const headerText = (value: string) =>
  hasLineBreak(value) ? mimeFuncs.encodeWord(value, 'Q', 52) : mimeFuncs.isPlainText(value) ? value : mimeFuncs.encodeWords(value, 'Q', 52);

function asciiAddress(address: string): string {
  const at = address.lastIndexOf('@');
  const domain = address.slice(at + 1);
  return /^[\x21-\x7e]*$/.test(domain) ? address : `${address.slice(0, at + 1)}${domainToASCII(domain) || domain}`;
}

/** The shape an address must have to be mailed to or from: local part, @, a dotted domain. */
export const ADDRESS_SHAPE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** `Name <address>` as a header carries it: the name quoted or encoded, the domain in ASCII. */
export function mailbox(m: { name: string | null; address: string }): string {
  const address = asciiAddress(m.address);
  if (!m.name) return address;
  const name = plainText(m.name) ? mimeFuncs.quoteString(m.name) : mimeFuncs.encodeWord(m.name, 'Q', 52);
  return `${name} <${address}>`;
}

/**
 * The message's bytes, built directly: an alternative of text and HTML (or either alone), inside a
 * related part with inline images, inside a mixed part with attachments; then, when `dkim` is given,
 * a DKIM-Signature over the result. Nothing is streamed or parsed back: a few string joins and one
 * quoted-printable pass per part; the signature is computed on libuv's threadpool.
 */
export async function encodeMessage(m: OutgoingMessage, dkim?: DkimKey, now = new Date()): Promise<EncodedMessage> {
  let content =
    m.html === null
      ? textPart(m.text ?? '', 'plain')
      : m.text === null
        ? textPart(m.html, 'html')
        : multipart('alternative', [textPart(m.text, 'plain'), textPart(m.html, 'html')]);
  const inline = m.attachments.filter(isInline);
  const attached = m.attachments.filter((a) => !isInline(a));
  if (inline.length) content = multipart('related', [content, ...inline.map(attachmentPart)]);
  if (attached.length) content = multipart('mixed', [content, ...attached.map(attachmentPart)]);

  const headers: Array<[string, string]> = [
    ['From', mailbox(m.from)],
    ['To', mailbox(m.to)],
    ['Reply-To', asciiAddress(m.replyTo)],
    ['Subject', headerText(m.subject)],
    ['Message-ID', m.messageId],
    ['Date', now.toUTCString().replace(/GMT$/, '+0000')],
    ['MIME-Version', '1.0'],
  ];
  for (const [name, value] of Object.entries(m.headers)) headers.push([name, headerText(value)]);
  headers.push(...content.headers);
  const folded = foldAll(headers);
  const head = headerBlock(folded);
  const signature = dkim ? await dkimSignature(folded, content.body, dkim, now.getTime()) : '';
  return {
    envelope: { from: asciiAddress(m.returnPath ?? m.from.address), to: [asciiAddress(m.to.address)] },
    raw: Buffer.from(`${signature}${head}\r\n${content.body}`),
  };
}
