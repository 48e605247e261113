/**
 * `{{var}}`, `{{data.x}}`, `{{var ?? fallback}}` placeholders. A missing value renders as empty (or
 * the fallback); arrays render as `<li>` items in HTML and comma-separated in text; in HTML every
 * value is escaped, so contact data can never inject markup.
 */
export const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;

/** `url`: values are percent-encoded, for placeholders inside a URL (webhooks). */
export type RenderMode = 'html' | 'text' | 'url';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]);

function lookup(vars: Record<string, unknown>, path: string): unknown {
  let value: unknown = vars;
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

const encode = (text: string, mode: RenderMode) => (mode === 'html' ? escapeHtml(text) : mode === 'url' ? encodeURIComponent(text) : text);

function present(value: unknown, mode: RenderMode): string {
  const scalar = (v: unknown) => (typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
  if (Array.isArray(value)) {
    const items = value.filter((v) => v !== null && v !== undefined).map(scalar);
    return mode === 'html' ? items.map((i) => `<li>${escapeHtml(i)}</li>`).join('') : encode(items.join(', '), mode);
  }
  return encode(scalar(value), mode);
}

function unquote(s: string): string {
  const m = /^(["'])(.*)\1$/s.exec(s);
  return m ? m[2] : s;
}

export function render(template: string, vars: Record<string, unknown>, mode: RenderMode): string {
  return template.replace(PLACEHOLDER, (_match, expr: string) => {
    const [path, ...rest] = expr.split('??');
    const value = lookup(vars, path.trim());
    if (value === undefined || value === null || value === '' || (Array.isArray(value) && value.length === 0)) {
      const fallback = rest.length ? unquote(rest.join('??').trim()) : '';
      return encode(fallback, mode);
    }
    return present(value, mode);
  });
}

/** The names a template may use for one recipient: their data fields (also under `data.`), email, id, and the links. */
export function templateVariables(input: {
  contact: { id: string; email: string; data: Record<string, unknown> };
  values?: Record<string, unknown>;
  links: { unsubscribeUrl: string; subscribeUrl: string; manageUrl: string };
}): Record<string, unknown> {
  const data = { ...input.contact.data, ...input.values };
  return { ...data, data, email: input.contact.email, id: input.contact.id, ...input.links };
}
