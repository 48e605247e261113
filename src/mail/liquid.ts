/**
 * Subjects and bodies are Liquid templates (LiquidJS), parsed once per template text and worker and
 * rendered per recipient. Nothing reads files: `include`, `render` and `layout` are refused when the
 * template is parsed. Rendering is capped in time, memory and output size (LiquidJS's own limits, and an
 * emitter that counts what is written).
 *
 * Templates written for the old placeholder syntax render as they always did: an output with no filter
 * that is a plain path (`{{name}}`, `{{data.plan}}`) or uses the old fallback (`{{name ?? "friend"}}`)
 * is rewritten, at parse time, into a call of the `legacy_value_` filter, which keeps the old rules:
 * missing is undefined, null, '' or [], arrays are `<li>` items in HTML and a comma list in text, objects
 * are JSON.
 */
import { Context, Liquid, LiquidError, Tag, type Template, type TagToken, Tokenizer, TokenKind, toValueSync } from 'liquidjs';
import { escapeHtml } from './render';

export type TemplateMode = 'html' | 'text';

/** Limits of one render. */
export const TEMPLATE_LIMITS = {
  /** Characters a template may have, the compiled HTML of an MJML source included. */
  parseChars: 20_000_000,
  /** Milliseconds one render may take: a runaway loop stops here, not at the end of its range. */
  renderMs: 250,
  /** Milliseconds all the renders of one request may take together (/v1/send to 50 recipients, a test send to 50 addresses). */
  requestRenderMs: 1000,
  /** What filters and ranges may allocate in one render (LiquidJS counts characters and items). */
  memory: 20_000_000,
  /** Characters one render may write. */
  outputChars: 20_000_000,
};

/** A template that does not parse: where, in the text as written. */
export class TemplateSyntaxError extends Error {
  /** The field it was written in, where the renderer knows it (a subject, a body). */
  field?: string;
  constructor(
    readonly reason: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(`${reason} at line ${line}, column ${column}`);
  }
}

/** A template that parsed but could not be rendered for one recipient: a cap it passed, or its own error. */
export class TemplateRenderError extends Error {
  /** The field whose render failed, where the renderer knows it. */
  field?: string;
}

/** `fn`, its template errors marked with the field they come from. */
export function inField<T>(field: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof TemplateRenderError || err instanceof TemplateSyntaxError) err.field ??= field;
    throw err;
  }
}

const FILE_TAGS = ['include', 'render', 'layout'];

/** Tags that would read another template: refused while parsing, so a template never reaches the file system. */
class FileTag extends Tag {
  constructor(token: TagToken, remain: unknown, liquid: Liquid) {
    super(token, [], liquid);
    throw new Error(`{% ${token.name} %} is not allowed: templates cannot read files`);
  }
  *render(): Generator<unknown, void, unknown> {}
}

/** What a legacy output looks up: a path Liquid evaluates, or one only the old lookup reads, and the fallback. */
interface LegacyOutput {
  path?: string;
  fallback: string;
}

const LEGACY = '\u0000legacy';

function oldLookup(vars: Record<string, unknown>, path: string): unknown {
  let value: unknown = vars;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function legacyPresent(value: unknown, fallback: string, mode: TemplateMode): string {
  const encode = (s: string) => (mode === 'html' ? escapeHtml(s) : s);
  if (value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)) return encode(fallback);
  const scalar = (v: unknown) => (typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
  if (Array.isArray(value)) {
    const items = value.filter((v) => v !== null && v !== undefined).map(scalar);
    return mode === 'html' ? items.map((i) => `<li>${escapeHtml(i)}</li>`).join('') : items.join(', ');
  }
  return encode(scalar(value));
}

function engine(mode: TemplateMode): Liquid {
  const liquid = new Liquid({
    outputEscape: mode === 'html' ? 'escape' : undefined,
    ownPropertyOnly: true,
    strictFilters: true,
    templates: {},
    relativeReference: false,
    parseLimit: TEMPLATE_LIMITS.parseChars,
    renderLimit: TEMPLATE_LIMITS.renderMs,
    memoryLimit: TEMPLATE_LIMITS.memory,
  });
  for (const name of FILE_TAGS) liquid.registerTag(name, FileTag);
  liquid.registerFilter('legacy_value_', {
    // Already escaped for its mode: the output escape must not run again.
    raw: true,
    handler(this: { context: Context }, value: unknown, index: number) {
      const table = (this.context.globals as Record<string, LegacyOutput[]>)[LEGACY];
      const out = table[index];
      const v = out.path === undefined ? toValueSync(value) : oldLookup(this.context.getAll() as Record<string, unknown>, out.path);
      return legacyPresent(v, out.fallback, mode);
    },
  });
  return liquid;
}

const engines: Record<TemplateMode, Liquid> = { html: engine('html'), text: engine('text') };

/** A path Liquid reads as the old lookup did (names of letters, digits, `_` and `-`, joined by dots). */
const LIQUID_PATH = /^[\p{L}_][\p{L}\p{N}_-]*(?:\.[\p{L}\p{N}_-]+)*$/u;
const KEYWORDS = new Set(['true', 'false', 'nil', 'null', 'empty', 'blank']);

function unquote(s: string): string {
  const m = /^(["'])(.*)\1$/s.exec(s);
  return m ? m[2] : s;
}

/** An output in the old syntax: a fallback (`??` is no Liquid), or a bare path (no filter, quotes, brackets or parentheses). */
function legacyOutput(content: string): { output: LegacyOutput; liquidPath?: string } | undefined {
  const [head, ...rest] = content.split('??');
  if (!rest.length && /["'[\]()|]/.test(content)) return undefined;
  const path = head.trim();
  const fallback = rest.length ? unquote(rest.join('??').trim()) : '';
  if (LIQUID_PATH.test(path) && !KEYWORDS.has(path)) return { output: { fallback }, liquidPath: path };
  return { output: { path, fallback } };
}

interface Translation {
  source: string;
  legacy: LegacyOutput[];
  /** Nothing but text and old-syntax placeholders: no tag, no filter, no expression. */
  placeholdersOnly: boolean;
  /** Rewritten spans, to map a position in `source` back to the text as written. */
  spans: Array<{ at: number; end: number; originalAt: number; originalEnd: number }>;
}

function translate(original: string, liquid: Liquid): Translation {
  const tokens = new Tokenizer(original, liquid.options.operators).readTopLevelTokens(liquid.options);
  const legacy: LegacyOutput[] = [];
  const spans: Translation['spans'] = [];
  let source = '';
  let from = 0;
  let placeholdersOnly = true;
  for (const token of tokens) {
    if (token.kind !== TokenKind.Output) {
      if (token.kind !== TokenKind.HTML) placeholdersOnly = false;
      continue;
    }
    const text = token.getText();
    const content = text.slice(text.startsWith('{{-') ? 3 : 2, text.length - (text.endsWith('-}}') ? 3 : 2)).trim();
    const found = legacyOutput(content);
    if (!found) {
      placeholdersOnly = false;
      continue;
    }
    const index = legacy.push(found.output) - 1;
    const open = text.startsWith('{{-') ? '{{-' : '{{';
    const close = text.endsWith('-}}') ? '-}}' : '}}';
    const replacement = `${open} ${found.liquidPath ?? 'nil'} | legacy_value_: ${index} ${close}`;
    source += original.slice(from, token.begin);
    spans.push({ at: source.length, end: source.length + replacement.length, originalAt: token.begin, originalEnd: token.end });
    source += replacement;
    from = token.end;
  }
  source += original.slice(from);
  return { source, legacy, spans, placeholdersOnly };
}

/** The offset in the text as written of an offset in the translated text. */
function originalOffset(t: Translation, offset: number): number {
  let shift = 0;
  for (const s of t.spans) {
    if (offset < s.at) break;
    if (offset < s.end) return s.originalAt;
    shift = s.originalEnd - s.end;
  }
  return offset + shift;
}

function position(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

/** LiquidJS's message without the position it appends (", line:1, col:2"), which is given apart. */
const reasonOf = (err: Error) => err.message.replace(/, line:\d+, col:\d+$/, '');

function syntaxError(err: unknown, original: string, t?: Translation): TemplateSyntaxError {
  if (!(err instanceof LiquidError)) throw err;
  const token = (err as LiquidError & { token?: { begin: number } }).token;
  const offset = token ? (t ? originalOffset(t, token.begin) : token.begin) : 0;
  const { line, column } = position(original, offset);
  return new TemplateSyntaxError(reasonOf(err), line, column);
}

interface Parsed {
  templates: Template[];
  legacy: LegacyOutput[];
  placeholdersOnly: boolean;
}

/**
 * Parsed templates by mode and text: a campaign's body, or one many sends share, is parsed once per
 * worker (thread). The text itself is the key, so a changed template is a new entry, never a stale one.
 */
const caches: Record<TemplateMode, Map<string, Parsed | TemplateSyntaxError>> = { html: new Map(), text: new Map() };
const CACHE_ENTRIES = 256;
const CACHE_CHARS = 25_000_000;
const cachedChars: Record<TemplateMode, number> = { html: 0, text: 0 };

function parse(text: string, mode: TemplateMode): Parsed {
  const cache = caches[mode];
  let parsed = cache.get(text);
  if (parsed === undefined) {
    const liquid = engines[mode];
    let t: Translation | undefined;
    try {
      t = translate(text, liquid);
      parsed = { templates: liquid.parse(t.source), legacy: t.legacy, placeholdersOnly: t.placeholdersOnly };
    } catch (err) {
      parsed = syntaxError(err, text, t);
    }
    while (cache.size && (cache.size >= CACHE_ENTRIES || cachedChars[mode] + text.length > CACHE_CHARS)) {
      const oldest = cache.keys().next().value!;
      cachedChars[mode] -= oldest.length;
      cache.delete(oldest);
    }
    cache.set(text, parsed);
    cachedChars[mode] += text.length;
  }
  if (parsed instanceof TemplateSyntaxError) throw parsed;
  return parsed;
}

/** Where `text` has Liquid tags and outputs, for work on the text around them that must leave them whole. */
export function templateTokens(text: string): Array<{ begin: number; end: number; tag: boolean }> {
  const tokens = new Tokenizer(text, engines.text.options.operators).readTopLevelTokens(engines.text.options);
  return tokens
    .filter((t) => t.kind === TokenKind.Output || t.kind === TokenKind.Tag)
    .map((t) => ({ begin: t.begin, end: t.end, tag: t.kind === TokenKind.Tag }));
}

/**
 * Whether `text` has nothing but old-syntax placeholders (`{{name}}`, `{{name ?? "friend"}}`), i.e. no
 * tag, filter or expression. Throws a `TemplateSyntaxError` when it does not parse.
 */
export function placeholdersOnly(text: string, mode: TemplateMode): boolean {
  return parse(text, mode).placeholdersOnly;
}

/** Throws a `TemplateSyntaxError` when `text` is not a template this service renders. */
export function checkTemplate(text: string, mode: TemplateMode): void {
  parse(text, mode);
}

/** Writes what a render produces, up to the output cap. */
class CappedEmitter {
  buffer = '';
  write(html: unknown): void {
    const s = typeof html === 'string' ? html : html === null || html === undefined ? '' : String(toValueSync(html));
    if (this.buffer.length + s.length > TEMPLATE_LIMITS.outputChars) throw new TemplateRenderError('output size limit exceeded');
    this.buffer += s;
  }
}

/**
 * A time limit several renders share (LiquidJS checks it as it renders): a request that renders for many
 * recipients on the event loop stops at one deadline, not at one cap per recipient.
 */
export class RenderDeadline {
  readonly at: number;
  constructor(ms: number) {
    this.at = performance.now() + ms;
  }
  check(now: number): void {
    if (now > this.at) throw new TemplateRenderError('template render limit exceeded');
  }
  use(): void {}
}

/**
 * One recipient's text of a template. Throws `TemplateSyntaxError` for a template that does not parse
 * (one stored before templates were checked), `TemplateRenderError` when a render passes a cap (its
 * own, or the `deadline` it shares with other renders).
 */
export function renderTemplate(text: string, vars: Record<string, unknown>, mode: TemplateMode, deadline?: RenderDeadline): string {
  const { templates, legacy } = parse(text, mode);
  const liquid = engines[mode];
  const ctx = new Context(vars, liquid.options, { globals: { [LEGACY]: legacy } });
  if (deadline && deadline.at < performance.now() + TEMPLATE_LIMITS.renderMs) ctx.renderLimit = deadline as unknown as Context['renderLimit'];
  const emitter = new CappedEmitter();
  try {
    toValueSync(liquid.renderer.renderTemplates(templates, ctx, emitter));
  } catch (err) {
    if (err instanceof TemplateRenderError) throw err;
    const cause = err instanceof LiquidError && err.originalError instanceof TemplateRenderError ? err.originalError : undefined;
    throw cause ?? new TemplateRenderError(err instanceof Error ? reasonOf(err) : String(err));
  }
  return emitter.buffer;
}
