import { escapeHtml } from '../mail/render';
import type { JsonSchema, OpenApiDocument, Operation, Parameter } from './openapi';

const e = (v: unknown) => escapeHtml(String(v));

const SECURITY_LABEL: Record<string, string> = { secretKey: 'secret key (sk_)', publicKey: 'public key (pk_)', session: 'session cookie' };

/** "string, 1-998 chars", "integer ≥ 1, default 20", "one of A, B": the facts of a schema that fit on a line. */
function typeLine(s: JsonSchema): string {
  // `X or null` reads better than a two-branch "one of".
  const variants = s.anyOf as JsonSchema[] | undefined;
  const nonNull = variants?.filter((v) => v.type !== 'null');
  if (variants?.length === 2 && nonNull?.length === 1 && !nonNull[0].properties && !nonNull[0].anyOf) {
    return [typeLine(nonNull[0]), 'or null'].filter(Boolean).join(' ');
  }
  const parts: string[] = [];
  const type = Array.isArray(s.type) ? s.type.join(' or ') : (s.type as string | undefined);
  if (s.const !== undefined) parts.push(`= ${JSON.stringify(s.const)}`);
  else if (Array.isArray(s.enum)) parts.push(`one of ${s.enum.map((v) => JSON.stringify(v)).join(', ')}`);
  else if (type) parts.push(s.format ? `${type} (${s.format})` : type);
  else if (!s.anyOf && !s.oneOf && !s.allOf && !s.$ref) parts.push('any');
  const range = (min: unknown, max: unknown, unit: string) =>
    min !== undefined && max !== undefined ? `${min}-${max} ${unit}` : min !== undefined ? `at least ${min} ${unit}` : `at most ${max} ${unit}`;
  if (s.minLength !== undefined || s.maxLength !== undefined) parts.push(range(s.minLength, s.maxLength, 'chars'));
  if (s.minItems !== undefined || s.maxItems !== undefined) parts.push(range(s.minItems, s.maxItems, 'items'));
  // zod bounds every integer to the safe range; only real bounds are worth a word.
  const bound = (n: unknown) => typeof n === 'number' && Math.abs(n) < Number.MAX_SAFE_INTEGER;
  if (bound(s.minimum)) parts.push(`≥ ${s.minimum}`);
  if (bound(s.maximum)) parts.push(`≤ ${s.maximum}`);
  if (bound(s.exclusiveMinimum)) parts.push(`> ${s.exclusiveMinimum}`);
  if (s.pattern !== undefined && !s.format) parts.push(`matching /${s.pattern}/`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  return parts.join(', ');
}

/** A schema as a nested list: each property with its type line, "required", description and inner shape. */
function schemaHtml(s: JsonSchema, depth = 0): string {
  if (depth > 8) return '';
  if (s.$ref) return `<span class="t">${e(String(s.$ref).split('/').pop())}</span>`;
  let out = '';
  const line = typeLine(s);
  if (line && depth === 0) out += `<span class="t">${e(line)}</span>`;
  const variants = (s.anyOf ?? s.oneOf) as JsonSchema[] | undefined;
  const nullable = variants?.length === 2 && variants.some((v) => v.type === 'null');
  if (variants && !(nullable && typeLine(s).endsWith('or null'))) {
    const variant = (v: JsonSchema) =>
      `<li>${v.title ? `<code>${e(v.title)}</code> ` : ''}<span class="t">${e(typeLine(v))}</span>` +
      `${schemaHtml({ ...v, description: undefined }, depth + 1)}</li>`;
    out += `<div class="t">one of:</div><ul>${variants.map(variant).join('')}</ul>`;
  }
  const props = s.properties as Record<string, JsonSchema> | undefined;
  if (props && Object.keys(props).length) {
    const required = new Set((s.required as string[] | undefined) ?? []);
    out += '<ul>';
    for (const [name, p] of Object.entries(props)) {
      const line = typeLine(p);
      out += `<li><code>${e(name)}</code>${line ? ` <span class="t">${e(line)}</span>` : ''}${required.has(name) ? ' <span class="req">required</span>' : ''}`;
      if (p.description) out += ` — ${e(p.description)}`;
      out += `${schemaHtml({ ...p, description: undefined }, depth + 1)}</li>`;
    }
    out += '</ul>';
  }
  const items = s.items as JsonSchema | undefined;
  if (items && (items.properties || items.anyOf || items.oneOf)) out += `<div class="t">each item:</div>${schemaHtml(items, depth + 1)}`;
  else if (items) out += ` <span class="t">of ${e(typeLine(items))}</span>`;
  if (s.additionalProperties && typeof s.additionalProperties === 'object' && Object.keys(s.additionalProperties).length) {
    out += `<div class="t">each value: ${e(typeLine(s.additionalProperties as JsonSchema))}</div>`;
  }
  if (depth === 0 && s.description) out += `<p>${e(s.description)}</p>`;
  return out;
}

function parametersHtml(params: Parameter[]): string {
  const rows = params
    .map(
      (p) =>
        `<tr><td><code>${e(p.name)}</code></td><td>${e(p.in)}</td><td>${e(typeLine(p.schema))}</td>` +
        `<td>${p.required ? 'yes' : ''}</td><td>${e(p.description ?? '')}</td></tr>`,
    )
    .join('');
  return `<h4>Parameters</h4><table><tr><th>Name</th><th>In</th><th>Type</th><th>Required</th><th>Notes</th></tr>${rows}</table>`;
}

const anchor = (method: string, path: string) => `${method}-${path}`.replace(/[^A-Za-z0-9]+/g, '-');

function operationHtml(method: string, path: string, op: Operation): string {
  const auth = op.security.length
    ? op.security
        .map((s) =>
          Object.keys(s)
            .map((k) => SECURITY_LABEL[k] ?? k)
            .join(' + '),
        )
        .join(' or ')
    : 'none';
  let out =
    `<section class="op" id="${e(anchor(method, path))}">` + `<h3><span class="m ${e(method)}">${e(method.toUpperCase())}</span> <code>${e(path)}</code></h3>`;
  out += `<p class="sum">${e(op.summary)}${op['x-internal'] ? ' <span class="internal">internal</span>' : ''}</p>`;
  if (op.description) out += `<p>${e(op.description)}</p>`;
  out += `<p class="auth">Auth: ${e(auth)}</p>`;
  if (op.parameters?.length) out += parametersHtml(op.parameters);
  if (op.requestBody) {
    for (const [type, { schema }] of Object.entries(op.requestBody.content)) {
      out += `<h4>Request body <span class="t">${e(type)}</span></h4><div class="schema">${schemaHtml(schema)}</div>`;
    }
  }
  out += '<h4>Responses</h4><ul class="responses">';
  for (const [status, r] of Object.entries(op.responses)) {
    out += `<li><b>${e(status)}</b> ${e(r.description)}`;
    for (const [type, { schema }] of Object.entries(r.content ?? {})) {
      // The response's description is already said; the schema's own would repeat it.
      const shape = Object.keys(schema).length ? schemaHtml({ ...schema, description: undefined }) : '';
      if (schema.$ref || !shape) out += ` <span class="t">${e(type)}</span> ${shape}`;
      else out += `<details><summary>${e(type)}</summary><div class="schema">${shape}</div></details>`;
    }
    out += '</li>';
  }
  return `${out}</ul></section>`;
}

/** The document as one self-contained page: every endpoint grouped by tag, no scripts, no external resources. */
export function renderDocsPage(doc: OpenApiDocument): string {
  const byTag = new Map<string, Array<[string, string, Operation]>>(doc.tags.map((t) => [t.name, []]));
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) byTag.get(op.tags[0])?.push([method, path, op]);
  }
  let toc = '';
  let body = '';
  for (const [tag, ops] of byTag) {
    toc += `<li><a href="#${e(anchor('tag', tag))}">${e(tag)}</a> (${ops.length})</li>`;
    body += `<h2 id="${e(anchor('tag', tag))}">${e(tag)}</h2>`;
    const row = ([m, p, op]: [string, string, Operation]) =>
      `<tr><td><span class="m ${e(m)}">${e(m.toUpperCase())}</span></td>` +
      `<td><a href="#${e(anchor(m, p))}"><code>${e(p)}</code></a></td><td>${e(op.summary)}</td></tr>`;
    body += `<table class="index">${ops.map(row).join('')}</table>`;
    body += ops.map(([m, p, op]) => operationHtml(m, p, op)).join('');
  }
  const error = doc.components.schemas.Error;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${e(doc.info.title)} API ${e(doc.info.version)}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f;line-height:1.45}
h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2.5rem}h3{margin:.2rem 0;font-size:1.05rem}h4{margin:.8rem 0 .3rem;font-size:.95rem}
.op{border:1px solid #ddd;border-radius:.4rem;padding:.6rem .9rem;margin:1rem 0}
.m{display:inline-block;min-width:4.2rem;text-align:center;border-radius:.25rem;color:#fff;font-size:.8rem;font-weight:600;padding:.1rem .3rem;background:#555}
.get{background:#1f6feb}.post{background:#2da44e}.put{background:#bf8700}.patch{background:#8250df}.delete{background:#cf222e}
.t{color:#57606a;font-size:.9em}.req{color:#cf222e;font-size:.85em}.internal{background:#eee;border-radius:.25rem;padding:0 .3rem;font-size:.8em}
.sum{margin:.3rem 0;font-weight:500}.auth{margin:.3rem 0;color:#57606a;font-size:.9em}
table{border-collapse:collapse;font-size:.9em}td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
table.index td{border:none;padding:.1rem .4rem}code{font-size:.95em}ul{margin:.2rem 0;padding-left:1.3rem}
.schema{font-size:.92em}details summary{cursor:pointer;color:#57606a}
</style></head><body>
<h1>${e(doc.info.title)} API <span class="t">${e(doc.info.version)}</span></h1>
<p>${e(doc.info.description)}</p>
<p>Machine-readable: <a href="/openapi.json">/openapi.json</a> (OpenAPI ${e(doc.openapi)}). Server: <code>${e(doc.servers[0]?.url ?? '')}</code></p>
<h3>Errors</h3><div class="schema">${schemaHtml(error)}</div>
<h3>Contents</h3><ul>${toc}</ul>
${body}
</body></html>`;
}
