import { z } from 'zod';

/**
 * The errors every layer throws: a status hint, a machine-readable code, and details. Base, engines and
 * modules throw these; the HTTP layer (src/http/error-envelope.ts) maps them to the documented envelope.
 */

export interface FieldError {
  field: string;
  message: string;
  code: string;
  received?: unknown;
}

export interface AppErrorOptions {
  details?: Record<string, unknown>;
  errors?: FieldError[];
  suggestion?: string;
  headers?: Record<string, string>;
  /** Dashboard resources answer some 400s as `{ error: <message> }` (the spec's simple form). */
  simple?: boolean;
}

/** The one error type every layer throws; `errorEnvelope` turns it into the documented shape. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly opts: AppErrorOptions = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string, code = 'BAD_REQUEST', opts?: AppErrorOptions) => new AppError(400, code, message, opts);
/** 400 in the spec's simple `{ error }` form, used by contacts, templates and segments. */
export const simpleBadRequest = (message: string) => new AppError(400, 'BAD_REQUEST', message, { simple: true });
export const unauthorized = (message: string, code = 'UNAUTHORIZED') => new AppError(401, code, message);
export const forbidden = (message: string, code = 'FORBIDDEN', opts?: AppErrorOptions) => new AppError(403, code, message, opts);
export const notFound = (what: string) => new AppError(404, 'NOT_FOUND', `${what} not found`);
export const conflict = (message: string, code = 'CONFLICT', opts?: AppErrorOptions) => new AppError(409, code, message, opts);

// zod 4 renamed some issue codes; the API keeps the vocabulary clients already know.
const ISSUE_CODES: Record<string, string> = {
  invalid_format: 'invalid_string',
  invalid_value: 'invalid_enum_value',
};

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

export function issuesToFieldErrors(issues: readonly z.core.$ZodIssue[]): FieldError[] {
  return issues.map((issue) => {
    const code = issue.code === 'custom' && typeof issue.params?.code === 'string' ? issue.params.code : (ISSUE_CODES[issue.code] ?? issue.code);
    const out: FieldError = { field: issue.path.map(String).join('.'), message: issue.message, code };
    if (issue.code === 'invalid_type' && 'input' in issue) out.received = typeName(issue.input);
    return out;
  });
}

export function validationError(issues: readonly z.core.$ZodIssue[]): AppError {
  return new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', { errors: issuesToFieldErrors(issues) });
}
