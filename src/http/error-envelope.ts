import type { Context, Next } from 'koa';
import { z } from 'zod';
import { AppError } from '../errors';

// The one place errors become HTTP answers: every layer throws src/errors.ts's AppError, and this maps it to the envelope.

/** The envelope `errorEnvelope` answers with, as the OpenAPI document describes it. */
export const errorEnvelopeSchema = z
  .object({
    success: z.literal(false),
    error: z.object({
      code: z.string().meta({ description: 'Machine-readable, such as VALIDATION_ERROR or NOT_FOUND' }),
      message: z.string(),
      statusCode: z.number().int(),
      requestId: z.string().meta({ description: 'Also in the X-Request-Id header; quote it to support' }),
      errors: z
        .array(
          z.object({
            field: z.string().meta({ description: 'Dot path, such as attachments.0.filename' }),
            message: z.string(),
            code: z.string().meta({ description: 'Issue code: invalid_string, invalid_type, too_big, reserved_event, ...' }),
            received: z.string().optional(),
          }),
        )
        .optional()
        .meta({ description: 'Only on validation failures (422)' }),
      details: z.record(z.string(), z.unknown()).optional(),
      suggestion: z.string().optional(),
    }),
    timestamp: z.iso.datetime(),
  })
  .meta({ description: 'Every error, except the simple form some dashboard 400s use' });

/** The spec's simple form, `{ error: <message> }`. */
export const simpleErrorSchema = z.object({ error: z.string() }).meta({ description: 'The simple error form of some dashboard 400s' });

/** Maps every thrown error to `{ success: false, error: {...}, timestamp }` (or `{ error }` where the spec says so). */
export async function errorEnvelope(ctx: Context, next: Next): Promise<void> {
  try {
    await next();
    if (ctx.status === 404 && ctx.body === undefined) {
      throw new AppError(404, 'NOT_FOUND', `No route for ${ctx.method} ${ctx.path}`);
    }
  } catch (thrown) {
    const err = normalise(thrown);
    if (err.status >= 500) ctx.state.log?.error({ err: thrown }, 'request failed');
    ctx.status = err.status;
    for (const [k, v] of Object.entries(err.opts.headers ?? {})) ctx.set(k, v);
    if (err.opts.simple) {
      ctx.body = { error: err.message };
      return;
    }
    const error: Record<string, unknown> = {
      code: err.code,
      message: err.message,
      statusCode: err.status,
      requestId: ctx.state.requestId,
    };
    if (err.opts.errors) error.errors = err.opts.errors;
    if (err.opts.details) error.details = err.opts.details;
    if (err.opts.suggestion) error.suggestion = err.opts.suggestion;
    ctx.body = { success: false, error, timestamp: new Date().toISOString() };
  }
}

function normalise(thrown: unknown): AppError {
  if (thrown instanceof AppError) return thrown;
  const e = thrown as { status?: number; statusCode?: number; type?: string; message?: string; expose?: boolean };
  const status = e?.status ?? e?.statusCode;
  // koa-body / raw-body / http-errors speak in `status` + `type`.
  if (status === 413 || e?.type === 'entity.too.large') {
    return new AppError(413, 'PAYLOAD_TOO_LARGE', 'Request body is too large');
  }
  if (status === 400 && (e?.type === 'entity.parse.failed' || /json/i.test(e?.message ?? ''))) {
    return new AppError(400, 'INVALID_JSON', 'Request body is not valid JSON');
  }
  if (status === 415) return new AppError(415, 'UNSUPPORTED_MEDIA_TYPE', e.message ?? 'Unsupported media type');
  if (typeof status === 'number' && status >= 400 && status < 500 && e.expose !== false) {
    return new AppError(status, 'BAD_REQUEST', e.message ?? 'Bad request');
  }
  return new AppError(500, 'INTERNAL_SERVER_ERROR', 'An unexpected error occurred');
}
