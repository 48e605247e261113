import type { Context } from 'koa';
import { z } from 'zod';
import { isUuid } from '../db/ids';
import { AppError, issuesToFieldErrors, validationError } from './errors';

/** The dot path of the first string (or key) holding U+0000, which PostgreSQL cannot store in text or jsonb. */
function nulPath(value: unknown, path: string): string | undefined {
  if (typeof value === 'string') return value.includes('\u0000') ? path || '(body)' : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [k, v] of Object.entries(value)) {
    const at = path ? `${path}.${k}` : k;
    if (k.includes('\u0000')) return at;
    const found = nulPath(v, at);
    if (found) return found;
  }
  return undefined;
}

/** Parses `input` with `schema` or throws 422 VALIDATION_ERROR with dot-path field errors. */
export function parse<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const nul = nulPath(input, '');
  if (nul) {
    throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
      errors: [{ field: nul, message: 'Text must not contain the NUL character (\\u0000)', code: 'invalid_string' }],
    });
  }
  const result = schema.safeParse(input, { reportInput: true });
  if (!result.success) throw validationError(result.error.issues);
  return result.data;
}


/** A path id (declare it in `endpoint({ params: { id: uuidPath } })`): 422 naming the parameter when not a UUID, else lower-cased. */
export const uuidPath = z
  .string()
  .refine(isUuid, { error: (issue) => `${String(issue.path?.at(-1) ?? 'id')} must be a valid UUID`, params: { code: 'invalid_string' } })
  .transform((v) => v.toLowerCase())
  .meta({ format: 'uuid' });

/** Trimmed, lower-cased email, the only form ever stored or looked up. */
export const emailSchema = z
  .string()
  .trim()
  .toLowerCase()
  .pipe(z.email({ message: 'Invalid email address' }).max(320));

/**
 * Parses the query string with `schema`; a bad parameter is 400 INVALID_PARAMETER (the spec's "invalid
 * parameters"), with the same field list as a body's 422.
 */
export function query<S extends z.ZodType>(ctx: Context, schema: S): z.output<S> {
  const result = schema.safeParse({ ...ctx.query }, { reportInput: true });
  if (!result.success) {
    const errors = issuesToFieldErrors(result.error.issues);
    throw new AppError(400, 'INVALID_PARAMETER', `Invalid query parameter ${errors[0].field}: ${errors[0].message}`, { errors });
  }
  return result.data;
}

/** A query parameter holding an ISO 8601 date-time (or date). */
export const isoDateParam = z
  .string()
  .refine((v) => !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 date-time')
  .transform((v) => new Date(v));

/** `a,b,c` or a repeated parameter, as a list. */
export const listParam = <T extends z.ZodType>(item: T, max: number) =>
  z.preprocess(
    (v) => (v === undefined ? undefined : (Array.isArray(v) ? v : [v]).flatMap((s) => String(s).split(',')).map((s) => s.trim()).filter(Boolean)),
    z.array(item).max(max),
  );
