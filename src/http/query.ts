import { z } from 'zod';
import { isUuid } from '../db/ids';
import type { AppError } from '../errors';

/**
 * Query parameter schemas for `endpoint({ query: z.object({...}) })`. Query strings are read
 * leniently, as the API always has: an empty value is no value, and a number that cannot be used
 * falls back to its default; only the parameters given an `invalid` error ever fail, with that error.
 * Each input is the first value of the parameter (or undefined); a `queryList` parameter reads them all.
 */

/** How a builder's parameter reads in the OpenAPI document, in place of its transform's "string". */
export const queryDocs = z.registry<Record<string, unknown>>();

const raw = z.string().optional();

/** The list parameters (`queryList`), which read every value of a repeated parameter. */
const listSchemas = new WeakSet<z.ZodType>();

/**
 * Each parameter's first value, as the schemas here read them (`?a=1&a=2` is `a: '1'`), except that a
 * `queryList` parameter of `shape` keeps all of them.
 */
export function firstValues(query: Record<string, string | string[] | undefined>, shape: Record<string, z.ZodType> = {}) {
  const isList = (s: z.ZodType | undefined) => !!s && listSchemas.has(s instanceof z.ZodOptional ? (s.unwrap() as z.ZodType) : s);
  return Object.fromEntries(Object.entries(query).map(([k, v]) => [k, Array.isArray(v) && !isList(shape[k]) ? v[0] : v]));
}

/** `a,b,c` or a repeated parameter (`?t=a&t=b`), as a list of at most `max` items; more fail the parameter. */
export function queryList<T extends z.ZodType>(item: T, max: number) {
  const schema = z.preprocess(
    (v) =>
      v === undefined
        ? undefined
        : (Array.isArray(v) ? v : [v])
            .flatMap((s) => String(s).split(','))
            .map((s) => s.trim())
            .filter(Boolean),
    z.array(item).max(max),
  );
  listSchemas.add(schema);
  return schema;
}

/** An ISO 8601 date-time (or date); strict, unlike `queryDate`: an empty or unreadable value fails the parameter. */
export const queryIsoDate = z
  .string()
  .refine((v) => !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 date-time')
  .transform((v) => new Date(v));

function documentedAs<S extends z.ZodType>(schema: S, doc: Record<string, unknown>): S {
  queryDocs.add(schema, Object.fromEntries(Object.entries(doc).filter(([, v]) => v !== undefined)));
  return schema;
}

/** Fails the parameter with `error` (the first such failure is what `input.query()` throws). */
function fail(ctx: z.RefinementCtx, error: AppError): never {
  ctx.addIssue({ code: 'custom', message: error.message, params: { error } });
  return z.NEVER;
}

export interface IntOptions {
  default: number;
  min: number;
  max?: number;
  /** Below `min`: clamp to it (default) or use the default. */
  belowMin?: 'clamp' | 'default';
  /** `0` means the default (the older `parseInt(v) || default` reading). */
  zeroIsDefault?: boolean;
  description?: string;
}

/** An integer that never fails: missing or unparseable is the default, out of range is clamped. */
export function queryInt(o: IntOptions) {
  const schema = raw.transform((v) => {
    const n = Number.parseInt(v ?? '', 10);
    if (Number.isNaN(n) || (o.zeroIsDefault && n === 0)) return o.default;
    if (n < o.min) return o.belowMin === 'default' ? o.default : o.min;
    return o.max === undefined ? n : Math.min(n, o.max);
  });
  const fallback = `Unusable values${o.zeroIsDefault ? ' and 0' : ''} mean ${o.default}`;
  const range = o.belowMin === 'default' ? 'values below the minimum mean the default too' : 'values out of range are clamped';
  return documentedAs(schema, {
    type: 'integer',
    default: o.default,
    minimum: o.min,
    maximum: o.max,
    description: [o.description, `${fallback}; ${range}.`].filter(Boolean).join(' '),
  });
}

/** One of `values`, or undefined when empty; anything else fails with `invalid()`. */
export function queryEnum<const T extends readonly string[]>(values: T, invalid: () => AppError, description?: string) {
  const schema = raw.transform((v, ctx): T[number] | undefined => {
    if (!v) return undefined;
    return values.includes(v) ? v : fail(ctx, invalid());
  });
  return documentedAs(schema, { type: 'string', enum: [...values], description });
}

/** One of `values`, anything else (or nothing) meaning `fallback`; never fails. */
export function queryChoice<const T extends readonly string[]>(values: T, fallback: T[number], o: { caseInsensitive?: boolean; description?: string } = {}) {
  const schema = raw.transform((v): T[number] => {
    const given = o.caseInsensitive ? v?.toLowerCase() : v;
    return given !== undefined && values.includes(given) ? given : fallback;
  });
  return documentedAs(schema, { type: 'string', enum: [...values], default: fallback, description: o.description });
}

/** Free text, or undefined when empty (after trimming and lower-casing when asked). */
export function queryText(o: { trim?: boolean; lowerCase?: boolean; description?: string } = {}) {
  const schema = raw.transform((v) => {
    let s = o.trim ? v?.trim() : v;
    if (o.lowerCase) s = s?.toLowerCase();
    return s || undefined;
  });
  return documentedAs(schema, { type: 'string', description: o.description });
}

/** A UUID (as given), or undefined when empty; anything else fails with `invalid()`. */
export function queryUuid(invalid: () => AppError, description?: string) {
  const schema = raw.transform((v, ctx) => {
    if (!v) return undefined;
    return isUuid(v) ? v : fail(ctx, invalid());
  });
  return documentedAs(schema, { type: 'string', format: 'uuid', description });
}

/** `true` or `false`, or undefined when empty; anything else fails with `invalid()`. */
export function queryBoolean(invalid: () => AppError, description?: string) {
  const schema = raw.transform((v, ctx) => {
    if (v === undefined || v === '') return undefined;
    return v === 'true' ? true : v === 'false' ? false : fail(ctx, invalid());
  });
  return documentedAs(schema, { type: 'boolean', description });
}

/** True only for the exact value `true`. */
export function queryFlag(description?: string) {
  return documentedAs(
    raw.transform((v) => v === 'true'),
    { type: 'boolean', default: false, description },
  );
}

/** Anything `new Date()` reads, or undefined when empty; anything else fails with `invalid()`. */
export function queryDate(invalid: () => AppError, description?: string) {
  const schema = raw.transform((v, ctx) => {
    if (!v) return undefined;
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? fail(ctx, invalid()) : d;
  });
  return documentedAs(schema, { type: 'string', format: 'date-time', description });
}
