import { z } from 'zod';
import { simpleBadRequest } from '../../errors';
import { pageQuery } from '../../http/pagination';
import { queryEnum, queryText } from '../../http/query';
import { dateTime, offsetList, sameShape } from '../../http/responses';
import { emailSchema } from '../../validation';
import { RULE_KINDS, type RuleKind, SUPPRESSION_REASONS } from './suppressions.entity';
import { IMPORT_STATUSES } from './suppression-imports.entity';
import type { toSuppressionImportDto } from './suppression-imports';
import type { listSuppressions, toRuleDto, toSuppressionDto } from './suppressions.service';

/** How many addresses one POST /suppressions takes. */
export const MAX_MANUAL_EMAILS = 1000;
/** Rules per project: each is matched against every address a project sends to. */
export const MAX_RULES = 100;
/** A WILDCARD pattern's length and its number of `*`: what bounds LIKE's work on one address. */
const MAX_WILDCARD_LENGTH = 100;
const MAX_WILDCARD_STARS = 10;

export const suppressionListQuery = z.object({
  ...pageQuery,
  email: queryText({ trim: true, lowerCase: true, description: 'Only this address (exact, any case)' }),
  reason: queryEnum(
    SUPPRESSION_REASONS,
    () => simpleBadRequest(`reason must be one of ${SUPPRESSION_REASONS.join(', ')}`),
    'Only entries made for this reason',
  ),
});

export const addSuppressionsSchema = z.object({
  emails: z
    .array(emailSchema)
    .min(1)
    .max(MAX_MANUAL_EMAILS)
    .meta({ description: `1 to ${MAX_MANUAL_EMAILS} addresses, listed with reason MANUAL; one already listed keeps its entry` }),
});

export const checkSchema = z.object({ email: emailSchema });

export const suppressionResponse = z.object({
  email: z.string(),
  reason: z.enum(SUPPRESSION_REASONS),
  emailId: z.string().optional().meta({ description: 'The email whose bounce or complaint put the address here' }),
  detail: z.string().optional().meta({ description: 'What the report said, or that the soft-bounce limit was reached' }),
  createdAt: dateTime,
});
sameShape<z.output<typeof suppressionResponse>, ReturnType<typeof toSuppressionDto>>(true);

export const suppressionListResponse = offsetList(suppressionResponse);
sameShape<z.output<typeof suppressionListResponse>, Awaited<ReturnType<typeof listSuppressions>>>(true);

export const addSuppressionsResponse = z.object({
  added: z.array(z.string()).meta({ description: 'The addresses this call listed' }),
  alreadyListed: z.array(z.string()).meta({ description: 'The addresses that were listed already (their entries are unchanged)' }),
});

export const deletedSuppressionResponse = z.object({ email: z.string(), deleted: z.literal(true) });

export const checkResponse = z.object({
  suppressed: z.boolean(),
  reason: z.enum([...SUPPRESSION_REASONS, 'RULE']).nullable(),
  ruleId: z.string().optional().meta({ description: 'With reason RULE: the rule that matches' }),
});

/** Why a rule's pattern is unusable for its kind, or undefined; string checks only, on at most 320 characters. */
export function patternProblem(kind: RuleKind, pattern: string): string | undefined {
  if (/\s/.test(pattern)) return 'The pattern must not contain whitespace';
  const at = pattern.indexOf('@');
  switch (kind) {
    case 'ADDRESS':
      return emailSchema.safeParse(pattern).success ? undefined : 'An ADDRESS pattern is an email address';
    case 'DOMAIN':
      return at === -1 && pattern.includes('.') && !/[*?]/.test(pattern) ? undefined : 'A DOMAIN pattern is a domain name, such as example.com';
    case 'PREFIX':
    case 'SUFFIX':
      return at === -1 && pattern.length <= 64 ? undefined : `A ${kind} pattern is part of the local part (before the @): no @, at most 64 characters`;
    case 'WILDCARD':
      if (at === -1) return 'A WILDCARD pattern covers the whole address and must contain @';
      // Kept short: LIKE's work on one address grows with the pattern's length.
      if (pattern.length > MAX_WILDCARD_LENGTH) return `A WILDCARD pattern has at most ${MAX_WILDCARD_LENGTH} characters`;
      return pattern.split('*').length - 1 > MAX_WILDCARD_STARS ? `A WILDCARD pattern has at most ${MAX_WILDCARD_STARS} *` : undefined;
  }
}

const ruleFields = {
  name: z.string().trim().min(1).max(200),
  kind: z.enum(RULE_KINDS).meta({
    description:
      'ADDRESS: one address; DOMAIN: every address at the domain; PREFIX / SUFFIX: local parts that start / end with the pattern; ' +
      'WILDCARD: the whole address, `*` any run of characters and `?` one character (must contain @)',
  }),
  pattern: z.string().trim().toLowerCase().min(1).max(320).meta({ description: 'Matched without regard to case; no regular expressions' }),
  enabled: z.boolean().optional().meta({ description: 'Default true; a disabled rule suppresses nothing' }),
};

const usablePattern = (rule: { kind?: RuleKind; pattern?: string }, ctx: z.RefinementCtx) => {
  if (rule.kind === undefined || rule.pattern === undefined) return;
  const problem = patternProblem(rule.kind, rule.pattern);
  if (problem) ctx.addIssue({ code: 'custom', path: ['pattern'], message: problem, params: { code: 'invalid_string' } });
};

export const createRuleSchema = z.object(ruleFields).superRefine(usablePattern);
/** A patch that changes the kind or the pattern is checked against the rule's other half by the service. */
export const updateRuleSchema = z
  .object({ name: ruleFields.name.optional(), kind: ruleFields.kind.optional(), pattern: ruleFields.pattern.optional(), enabled: ruleFields.enabled })
  .superRefine(usablePattern);

export type CreateRule = z.output<typeof createRuleSchema>;
export type UpdateRule = z.output<typeof updateRuleSchema>;

export const ruleResponse = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.enum(RULE_KINDS),
  pattern: z.string(),
  enabled: z.boolean(),
  createdAt: dateTime,
  updatedAt: dateTime,
});
sameShape<z.output<typeof ruleResponse>, ReturnType<typeof toRuleDto>>(true);

export const ruleListResponse = z.object({ data: z.array(ruleResponse) });

export const importJobResponse = z.object({
  jobId: z.string(),
  status: z.enum(IMPORT_STATUSES),
  filename: z.string().nullable(),
  sizeBytes: z.number().int(),
  processedBytes: z.number().int(),
  rows: z.number().int().meta({ description: 'Rows read (the header not counted)' }),
  added: z.number().int().meta({ description: 'Addresses this import listed (reason MANUAL)' }),
  alreadyListed: z.number().int().meta({ description: 'Valid addresses that were listed already (their entries unchanged)' }),
  invalid: z.number().int().meta({ description: 'Rows without a valid address: not added' }),
  errors: z.array(z.object({ line: z.number().int(), error: z.string() })).meta({ description: 'The first 1000 invalid rows, with why' }),
  error: z.string().nullable().meta({ description: 'Why a FAILED import stopped' }),
  createdAt: dateTime,
  updatedAt: dateTime,
  completedAt: dateTime.nullable(),
});
sameShape<z.output<typeof importJobResponse>, ReturnType<typeof toSuppressionImportDto>>(true);
