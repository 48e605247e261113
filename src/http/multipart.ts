import fs from 'node:fs';
import type { Context, Middleware } from 'koa';
import type { File } from 'formidable';
import { koaBody } from 'koa-body';
import { AppError, simpleBadRequest } from '../errors';

/**
 * Parses a multipart body holding one file of at most `maxBytes`, streamed to a temporary file as
 * it arrives (never whole in memory); larger is 413 with `tooLarge` as the message.
 */
export function multipartFile(maxBytes: number, tooLarge: string): Middleware {
  return koaBody({
    multipart: true,
    json: false,
    urlencoded: false,
    text: false,
    formidable: { maxFileSize: maxBytes, maxTotalFileSize: maxBytes, maxFiles: 1 },
    onError: (err) => {
      if ((err as { httpCode?: number }).httpCode === 413) throw new AppError(413, 'PAYLOAD_TOO_LARGE', tooLarge);
      throw simpleBadRequest(`Invalid multipart body: ${err.message}`);
    },
  });
}

/**
 * Runs `use` with the file uploaded in `field` (422 naming the field when there is none), and
 * removes the temporary file afterwards, whatever happens.
 */
export async function withUploadedFile<T>(ctx: Context, field: string, what: string, use: (file: File) => Promise<T>): Promise<T> {
  const value = ctx.request.files?.[field];
  const file = (Array.isArray(value) ? value[0] : value) as File | undefined;
  try {
    if (!file) {
      throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
        errors: [{ field, message: `${what} is required in the multipart field "${field}"`, code: 'invalid_type' }],
      });
    }
    return await use(file);
  } finally {
    if (file) await fs.promises.rm(file.filepath, { force: true });
  }
}
