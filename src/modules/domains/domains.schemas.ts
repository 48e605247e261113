import { domainToASCII } from 'node:url';
import { z } from 'zod';

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
