/**
 * MJML sources compiled to HTML (the `mjml` package) when a template or campaign is written, never per
 * recipient. Liquid inside survives: outputs and tags in text pass through MJML as text, and a tag that
 * stands between components (`{% for %}` around `<mj-text>`s) is wrapped in `<mj-raw>`, which MJML
 * copies as it is, where MJML would otherwise drop it.
 */
import mjml2html from 'mjml';
import { templateTokens } from './liquid';

/** MJML that does not compile: its first error, with its line. */
export class MjmlError extends Error {}

/** Components whose children are components: a Liquid tag directly inside one needs `<mj-raw>`. */
const STRUCTURAL = new Set(['mj-body', 'mj-wrapper', 'mj-section', 'mj-group', 'mj-column', 'mj-hero']);
const MJ_TAG = /<(\/?)(mj-[a-z-]+)\b[^>]*>/g;

/** The source with each Liquid tag that stands between components wrapped in `<mj-raw>`. */
export function wrapLiquidTags(source: string): string {
  const tags = templateTokens(source).filter((t) => t.tag);
  if (!tags.length) return source;
  const stack: string[] = [];
  let out = '';
  let from = 0;
  let next = 0;
  const wrapUpTo = (end: number) => {
    for (; next < tags.length && tags[next].begin < end; next++) {
      const t = tags[next];
      if (!STRUCTURAL.has(stack[stack.length - 1] ?? '')) continue;
      out += `${source.slice(from, t.begin)}<mj-raw>${source.slice(t.begin, t.end)}</mj-raw>`;
      from = t.end;
    }
  };
  for (const m of source.matchAll(MJ_TAG)) {
    wrapUpTo(m.index);
    const [whole, closing, name] = m;
    if (closing) {
      const at = stack.lastIndexOf(name);
      if (at !== -1) stack.length = at;
    } else if (!whole.endsWith('/>')) stack.push(name);
  }
  wrapUpTo(source.length);
  return out + source.slice(from);
}

export async function compileMjml(source: string): Promise<string> {
  let result: Awaited<ReturnType<typeof mjml2html>>;
  try {
    // Strict: an invalid source is refused, never sent half-compiled. Includes would read files.
    result = await mjml2html(wrapLiquidTags(source), { validationLevel: 'strict', ignoreIncludes: true });
  } catch (err) {
    const errors = (err as { errors?: Array<{ line?: number; message: string }> }).errors;
    const first = errors?.[0];
    if (first) throw new MjmlError(`invalid MJML${first.line ? ` at line ${first.line}` : ''}: ${first.message}`);
    throw new MjmlError(`invalid MJML: ${(err as Error).message}`);
  }
  return result.html;
}
