import { compile } from 'html-to-text';

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
