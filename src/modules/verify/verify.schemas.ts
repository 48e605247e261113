import { z } from 'zod';
import { sameShape, successEnvelope } from '../../http/responses';
import { emailSchema } from '../../validation';
import type { VerificationResult } from './verify.service';

/**
 * The address must be syntactically valid (422 otherwise): the same rules as every email the
 * service stores, plus the RFC 5321 / RFC 1035 length limits, since the domain goes to DNS.
 * Internationalised domains are accepted in their ASCII (xn--) form only, as everywhere else.
 */
const verifiableEmail = emailSchema.superRefine((email, ctx) => {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  const fail = (message: string) => ctx.addIssue({ code: 'custom', message, params: { code: 'invalid_string' } });
  if (local.length > 64) fail('The local part of an email address is at most 64 characters');
  if (domain.length > 253) fail('The domain of an email address is at most 253 characters');
  else if (domain.split('.').some((label) => label.length > 63)) fail('Each label of the domain is at most 63 characters');
});

export const verifySchema = z.object({ email: verifiableEmail });

export type VerifyInput = z.output<typeof verifySchema>;

export const verificationResponse = successEnvelope(
  z.object({
    email: z.string(),
    valid: z.boolean().meta({ description: 'Overall validity' }),
    isDisposable: z.boolean(),
    isAlias: z.boolean().meta({ description: 'A forwarding or alias service' }),
    isTypo: z.boolean(),
    isPlusAddressed: z.boolean(),
    isPersonalEmail: z.boolean().meta({ description: 'A free or personal mailbox provider' }),
    domainExists: z.boolean().meta({ description: 'The domain has NS records' }),
    hasWebsite: z.boolean().meta({ description: 'The domain has A or AAAA records; informational only' }),
    hasMxRecords: z.boolean(),
    suggestedEmail: z.string().optional().meta({ description: 'The likely intended address, when a typo was detected' }),
    reasons: z.array(z.string()).meta({ description: 'Human-readable reasons, DNS failures included' }),
  }),
);
sameShape<z.output<typeof verificationResponse>['data'], VerificationResult>(true);
