import { z } from 'zod';
import { pageQuery } from '../../http/pagination';
import { dateTime, offsetList, sameShape } from '../../http/responses';
import type { listInboundEmails, toInboundEmailDto } from './inbound-emails.service';

export const inboundEmailListQuery = z.object({ ...pageQuery });
export type InboundEmailListQuery = z.output<typeof inboundEmailListQuery>;

export const inboundEmailResponse = z.object({
  id: z.string(),
  from: z.string().meta({ description: "The sender's address (the From: header, else the envelope sender), lower-case" }),
  to: z.array(z.string()).meta({ description: 'The To: addresses' }),
  cc: z.array(z.string()).meta({ description: 'The Cc: addresses' }),
  subject: z.string(),
  text: z.string().nullable().meta({ description: 'The plain-text body (from the HTML when the message has none)' }),
  html: z.string().nullable(),
  headers: z.array(z.object({ name: z.string(), value: z.string() })).meta({ description: 'Every header line, in order, unfolded' }),
  attachments: z.array(z.object({ filename: z.string().nullable(), contentType: z.string(), size: z.number().int() })).meta({
    description: 'What the message carried; the content is in the raw message (GET /inbound-emails/{id}/raw)',
  }),
  emailId: z.string().nullable().meta({ description: "The project's sent email this answers (its Message-ID in In-Reply-To or References), else null" }),
  receivedAt: dateTime,
});
sameShape<z.output<typeof inboundEmailResponse>, ReturnType<typeof toInboundEmailDto>>(true);

export const inboundEmailListResponse = offsetList(inboundEmailResponse);
sameShape<z.output<typeof inboundEmailListResponse>, Awaited<ReturnType<typeof listInboundEmails>>>(true);
