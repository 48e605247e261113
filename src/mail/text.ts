import { compile } from 'html-to-text';
import { templateTokens } from './liquid';

// Compiled once: building the selector matcher is most of the cost of a conversion.
const convert = compile({
  wordwrap: false,
  selectors: [
    { selector: 'a', options: { linkBrackets: ['[', ']'], hideLinkHrefIfSameAsText: true, ignoreHref: false } },
    { selector: 'img', format: 'skip' },
    { selector: 'table', format: 'block' },
    { selector: 'tr', format: 'block' },
    { selector: 'td', format: 'inlineSurround', options: { suffix: ' ' } },
    { selector: 'th', format: 'inlineSurround', options: { suffix: ' ' } },
  ],
});

/**
 * The plain-text alternative: links as `text [url]`, images skipped, tables as blocks, no word wrap.
 * Undefined when nothing is left, so the message goes out as HTML only.
 */
export function htmlToText(html: string): string | undefined {
  const text = convert(html)
    .replace(/[ \t]+$/gm, '')
    .trim();
  return text.length ? text : undefined;
}

/** `html` (a template that parses) with its Liquid tokens replaced by numbered private-use markers, the tokens kept in `kept`. */
function standAside(html: string, kept: string[]): string {
  let out = '';
  let from = 0;
  for (const t of templateTokens(html)) {
    out += `${html.slice(from, t.begin)}\uE000${kept.push(html.slice(t.begin, t.end)) - 1}\uE001`;
    from = t.end;
  }
  return out + html.slice(from);
}

/** Converted templates by their HTML; a campaign's body, or a body many /v1/send requests share, is converted once. */
const templates = new Map<string, string | null>();
const TEMPLATES_KEPT = 256;

/**
 * The plain-text alternative of a template of placeholders (one that parses), kept, to be rendered per recipient in text
 * mode: converting each recipient's rendered HTML cost more than everything else done per recipient.
 * Liquid outputs stand aside as private-use tokens while converting, so headings' upper-casing and link
 * formatting never touch them (values are then inserted as they are, not upper-cased).
 */
export function htmlToTextTemplate(html: string): string | undefined {
  let text = templates.get(html);
  if (text === undefined) {
    const kept: string[] = [];
    const converted = htmlToText(standAside(html, kept));
    text = converted === undefined ? null : converted.replace(/\uE000(\d+)\uE001/g, (_t, i: string) => kept[Number(i)]);
    if (templates.size >= TEMPLATES_KEPT) templates.delete(templates.keys().next().value!);
    templates.set(html, text);
  }
  return text ?? undefined;
}
