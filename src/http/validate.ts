import { z } from 'zod';
import { isUuid } from '../db/ids';
import { AppError, validationError } from './errors';

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
