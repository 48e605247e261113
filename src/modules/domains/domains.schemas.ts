import { domainToASCII } from 'node:url';
import { z } from 'zod';
import { dateTime, sameShape } from '../../http/responses';
import type { toDomainDto } from './domains.service';

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** A registrable host name: lower-cased, punycoded, at least two labels, no trailing dot. */
export const domainNameSchema = z
  .string()
  .trim()
  .toLowerCase()
  .transform((v) => domainToASCII(v.replace(/\.$/, '')))
  .refine((v) => v.length > 0 && v.length <= 253 && v.split('.').length >= 2 && v.split('.').every((l) => LABEL.test(l)), {
    message: 'Must be a domain name such as mail.example.com',
    params: { code: 'invalid_string' },
  });

export const createDomainSchema = z.object({ domain: domainNameSchema });

const dnsRecord = z.object({
  type: z.enum(['TXT', 'MX']),
  name: z.string(),
  value: z.string(),
  required: z.boolean(),
  purpose: z.enum(['ownership', 'dkim', 'spf', 'dmarc', 'return-path', 'return-path-spf', 'inbound']).meta({
    description:
      'return-path: the MX where bounces and complaints come back; return-path-spf: SPF for that host; inbound: the MX of inbound.<domain>, ' +
      'where mail to any address is received (GET /inbound-emails). These three are never required',
  }),
  priority: z.number().int().optional().meta({ description: 'MX records: the preference to publish' }),
  status: z.enum(['verified', 'pending', 'error']).optional().meta({ description: 'The last check’s finding (absent on creation)' }),
  found: z.array(z.string()).optional().meta({ description: 'What DNS answered at that name' }),
  error: z.string().optional(),
});

export const domainResponse = z.object({
  id: z.string(),
  projectId: z.string(),
  domain: z.string(),
  status: z.enum(['pending', 'verified']),
  verified: z.boolean(),
  dkimSelector: z.string(),
  records: z.array(dnsRecord).meta({ description: 'The DNS records to publish' }),
  returnPath: z
    .object({ host: z.string(), verified: z.boolean() })
    .meta({ description: 'Mail goes out with a per-message envelope sender on this host once both its records are found; until then with the From address' }),
  verifiedAt: dateTime.nullable(),
  lastCheckedAt: dateTime.nullable(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<Omit<z.output<typeof domainResponse>, 'records'>, Omit<ReturnType<typeof toDomainDto>, 'records'>>(true);
