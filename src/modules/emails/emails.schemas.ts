import { trackingOverrideSchema } from '../accounts';
import { z } from 'zod';
import { emailSchema } from '../../validation';
import { dataMapSchema } from '../contacts';
import { subjectSchema } from '../templates';
import { dateTime, sameShape, successEnvelope } from '../../http/responses';
import type { SendResult } from './emails.service';

const noBreaks = z.string().refine((s) => !/[\r\n\0]/.test(s), { message: 'Cannot contain line breaks or NUL', params: { code: 'invalid_string' } });

export const MAX_RECIPIENTS = 50;
export const MAX_ATTACHMENTS = 10;

const recipientObject = z.object({ name: noBreaks.pipe(z.string().max(200)).optional(), email: emailSchema });
const recipient = z.union([emailSchema, recipientObject]);

/** `from` as `"a@b.c"`, `"Name <a@b.c>"` or `{ name, email }`; parsed further by the service. */
const sender = z.union([noBreaks.pipe(z.string().min(3).max(400)), recipientObject]);

/** RFC 5322 field names: printable ASCII except the colon (custom headers, over HTTP and SMTP). */
export const HEADER_NAME = /^[\x21-\x39\x3b-\x7e]{1,200}$/;
const headerName = z.string().regex(HEADER_NAME, 'Header names are printable ASCII without colons, line breaks or spaces');
const headerValue = z
  .string()
  .max(998)
  .refine((v) => !/[\r\n\0]/.test(v), { message: 'Header values cannot contain CR, LF or NUL', params: { code: 'invalid_string' } });

/** Headers the service sets from the request's own fields; overriding them would break the message. */
export const STRUCTURAL_HEADERS = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'reply-to',
  'sender',
  'message-id',
  'date',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'dkim-signature',
  'return-path',
]);

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** An attachment; `content` is base64 over HTTP, the decoded bytes in a submitted message. */
const attachmentOf = <C extends z.ZodType>(content: C) =>
  z
    .object({
      filename: z
        .string()
        .min(1)
        .max(255)
        // The spec: "no newline or quote characters" — both quotes, and every line break a mail header could fold on.
        .refine((s) => !/[\r\n\0"'\u2028\u2029\u0085]/.test(s), {
          message: 'Filenames cannot contain line breaks, NUL or quotes',
          params: { code: 'invalid_string' },
        }),
      content,
      contentType: z.string().regex(/^[\w!#$&^.+-]+\/[\w!#$&^.+-]+(\s*;[^\r\n\0]*)?$/, 'contentType must be a MIME type such as image/png'),
      contentId: z
        .string()
        .min(1)
        .max(255)
        .refine((s) => !/[\r\n\0<>\s]/.test(s), {
          message: 'contentId cannot contain spaces, angle brackets, line breaks or NUL',
          params: { code: 'invalid_string' },
        })
        .optional(),
      disposition: z.enum(['attachment', 'inline']).default('attachment'),
    })
    .superRefine((a, ctx) => {
      if (a.disposition === 'inline' && !a.contentId) {
        ctx.addIssue({
          code: 'custom',
          path: ['contentId'],
          message: 'Inline attachments need a contentId (referenced as cid:<contentId>)',
          params: { code: 'invalid_type' },
        });
      }
    });

const base64Content = z
  .string()
  .min(1)
  .refine((s) => s.replace(/\s+/g, '').length % 4 === 0 && BASE64.test(s.replace(/\s+/g, '')), {
    message: 'content must be base64',
    params: { code: 'invalid_string' },
  });

const body = z.string().min(1);

/** The fields of a send; attachments' content as `content` says. */
const sendFields = <C extends z.ZodType>(content: C) => ({
  // The cap is checked after the union, so a long list is 422 `too_big` naming it, not an opaque invalid_union.
  to: z.union([recipient, z.array(recipient).min(1)]).superRefine((to, ctx) => {
    if (Array.isArray(to) && to.length > MAX_RECIPIENTS) {
      ctx.addIssue({
        code: 'too_big',
        origin: 'array',
        maximum: MAX_RECIPIENTS,
        inclusive: true,
        message: `to takes at most ${MAX_RECIPIENTS} recipients per request (each gets an email of its own); send more in several requests or as a campaign`,
      });
    }
  }),
  subject: subjectSchema.optional(),
  body: body.optional(),
  template: z.uuid({ message: 'template must be a template id (UUID)' }).optional(),
  from: sender.optional(),
  name: noBreaks.pipe(z.string().max(200)).optional(),
  subscribed: z.boolean().optional(),
  data: dataMapSchema.optional(),
  headers: z.record(headerName, headerValue).optional(),
  reply: emailSchema.optional(),
  attachments: z.array(attachmentOf(content)).max(MAX_ATTACHMENTS).optional(),
  tracking: trackingOverrideSchema.optional(),
});

/** The rules across fields: content or a template, and no header the service sets itself. */
function sendRules(v: { template?: string; subject?: string; body?: string; headers?: Record<string, string> }, ctx: z.RefinementCtx): void {
  if (!v.template) {
    if (v.subject === undefined)
      ctx.addIssue({ code: 'custom', path: ['subject'], message: 'subject is required without a template', params: { code: 'invalid_type' } });
    if (v.body === undefined)
      ctx.addIssue({ code: 'custom', path: ['body'], message: 'body is required without a template', params: { code: 'invalid_type' } });
  }
  for (const name of Object.keys(v.headers ?? {})) {
    if (STRUCTURAL_HEADERS.has(name.toLowerCase())) {
      ctx.addIssue({
        code: 'custom',
        path: ['headers', name],
        message: `${name} is set by the service from the request's fields`,
        params: { code: 'invalid_string' },
      });
    }
  }
}

export const sendSchema = z.object(sendFields(base64Content)).superRefine(sendRules);

/**
 * A message submitted over SMTP, as /v1/send would take it and checked by the same rules: `body` is its
 * HTML (or else its text), `text` its text part beside the HTML, attachments their decoded bytes, and
 * `cc` the Cc: header's addresses, named by the same rule as recipients.
 */
export const submittedSendSchema = z
  .object({
    ...sendFields(z.instanceof(Buffer).refine((b) => b.length > 0, 'an attachment cannot be empty')),
    text: body.optional(),
    cc: z.array(recipientObject).optional(),
  })
  .superRefine(sendRules);

export type SendInput = z.output<typeof sendSchema>;
export type AttachmentInput = NonNullable<SendInput['attachments']>[number];

export const sendResponse = successEnvelope(
  z.object({
    emails: z.array(
      z.object({
        contact: z.object({ id: z.string(), email: z.string() }),
        email: z.string().meta({ description: 'The email record id (webhook events carry it as emailId)' }),
        status: z.enum(['QUEUED', 'SUPPRESSED']).meta({
          description: 'QUEUED: it goes out. SUPPRESSED: the address is on the suppression list or matches a rule; the email is recorded, never sent',
        }),
      }),
    ),
    timestamp: dateTime,
  }),
);
sameShape<z.output<typeof sendResponse>['data'], Omit<SendResult, 'events'>>(true);
