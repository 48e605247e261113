import { AppError } from '../../http/errors';
import { checkTemplate, TemplateRenderError, TemplateSyntaxError } from '../../mail/liquid';
import { compileMjml, MjmlError } from '../../mail/mjml';

export const BODY_FORMATS = ['html', 'mjml'] as const;
export type BodyFormat = (typeof BODY_FORMATS)[number];

/** A template text refused where it is written: 422 naming the field, its line and column. */
export function invalidTemplate(field: string, reason: string): AppError {
  const message = `${field}: ${reason}`;
  return new AppError(422, 'VALIDATION_ERROR', message, { errors: [{ field, message, code: 'invalid_template' }] });
}

/** A template error met while rendering for a request (a preview, /v1/send): the same 422, naming the field when known. */
export function templateErrorResponse(err: unknown): never {
  if (err instanceof TemplateSyntaxError || err instanceof TemplateRenderError) {
    throw invalidTemplate(
      (err as { field?: string }).field ?? 'body',
      err instanceof TemplateRenderError ? `could not be rendered: ${err.message}` : err.message,
    );
  }
  throw err;
}

function checked(field: string, text: string, mode: 'html' | 'text'): void {
  try {
    checkTemplate(text, mode);
  } catch (err) {
    if (err instanceof TemplateSyntaxError) throw invalidTemplate(field, err.message);
    throw err;
  }
}

/**
 * Checks what is written (a subject is a text template, a body an HTML one) and, for an MJML body,
 * compiles it: the HTML it answers is what mail is rendered from (null: the body is that HTML). Errors
 * name `${prefix}subject` or `${prefix}body`.
 */
export async function checkedContent(c: { subject?: string; body?: string; format: BodyFormat }, prefix = ''): Promise<{ bodyHtml: string | null }> {
  if (c.subject !== undefined) checked(`${prefix}subject`, c.subject, 'text');
  if (c.body === undefined || c.format === 'html') {
    if (c.body !== undefined) checked(`${prefix}body`, c.body, 'html');
    return { bodyHtml: null };
  }
  // Liquid first, so its errors name lines of the source as written.
  checked(`${prefix}body`, c.body, 'html');
  let html: string;
  try {
    html = await compileMjml(c.body);
  } catch (err) {
    if (err instanceof MjmlError) throw invalidTemplate(`${prefix}body`, err.message);
    throw err;
  }
  checked(`${prefix}body`, html, 'html');
  return { bodyHtml: html };
}

/** The HTML a message of a template or campaign is rendered from: the compiled MJML, else the body. */
export const sendableBody = (m: { body: string; bodyHtml: string | null }) => m.bodyHtml ?? m.body;
