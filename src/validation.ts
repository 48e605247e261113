import { z } from 'zod';
import { isUuid } from './db/ids';
import { AppError, validationError } from './errors';

/** How deeply request JSON may nest (objects and arrays); deeper is 422, before anything walks it. */
export const MAX_JSON_DEPTH = 64;

interface TextProblem {
  field: string;
  message: string;
  code: string;
}

/**
 * The first place in request JSON that PostgreSQL cannot store or that is nested too deeply: a string
 * or key holding U+0000 (text and jsonb refuse it) or a lone UTF-16 surrogate (jsonb refuses it, text
 * would silently turn it into U+FFFD). Iterative, so no body can overflow the stack.
 */
function unstorable(input: unknown): TextProblem | undefined {
  const stack: Array<{ value: unknown; path: string; depth: number }> = [{ value: input, path: '', depth: 0 }];
  while (stack.length) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      const problem = textProblem(value, path || '(body)');
      if (problem) return problem;
      continue;
    }
    // Bytes (a submitted message's attachments) are not text and are not walked.
    if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value)) continue;
    if (depth >= MAX_JSON_DEPTH) {
      return { field: path || '(body)', message: `JSON must not nest more than ${MAX_JSON_DEPTH} levels deep`, code: 'too_big' };
    }
    const entries = Object.entries(value);
    for (let i = entries.length - 1; i >= 0; i--) {
      const [k, v] = entries[i];
      const at = path ? `${path}.${k}` : k;
      const problem = textProblem(k, at);
      if (problem) return problem;
      stack.push({ value: v, path: at, depth: depth + 1 });
    }
  }
  return undefined;
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function textProblem(text: string, field: string): TextProblem | undefined {
  if (text.includes('\u0000')) return { field, message: 'Text must not contain the NUL character (\\u0000)', code: 'invalid_string' };
  if (LONE_SURROGATE.test(text)) return { field, message: 'Text must be valid Unicode (it holds a lone UTF-16 surrogate)', code: 'invalid_string' };
  return undefined;
}

/** Parses `input` with `schema` or throws 422 VALIDATION_ERROR with dot-path field errors. */
export function parse<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const problem = unstorable(input);
  if (problem) throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', { errors: [problem] });
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
