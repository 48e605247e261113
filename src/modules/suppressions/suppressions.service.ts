import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { AppError, notFound } from '../../errors';
import { type RuleKind, Suppression, type SuppressionReason, SuppressionRule } from './suppressions.entity';
import { exportPage, insertSuppressions, type NewSuppression, suppressionVerdict } from './suppressions.queries';
import { type CreateRule, MAX_RULES, patternProblem, type UpdateRule } from './suppressions.schemas';

export const toSuppressionDto = (s: Suppression) => ({
  email: s.email,
  reason: s.reason,
  ...(s.emailId ? { emailId: s.emailId } : {}),
  ...(s.detail ? { detail: s.detail } : {}),
  createdAt: s.createdAt.toISOString(),
});

export const toRuleDto = (r: SuppressionRule) => ({
  id: r.id,
  name: r.name,
  kind: r.kind,
  pattern: r.pattern,
  enabled: r.enabled,
  createdAt: r.createdAt.toISOString(),
  updatedAt: r.updatedAt.toISOString(),
});

export interface SuppressionListQuery {
  page: number;
  pageSize: number;
  email?: string;
  reason?: SuppressionReason;
}

/** The project's list, newest first. */
export async function listSuppressions(em: EntityManager, projectId: string, q: SuppressionListQuery) {
  const [rows, total] = await em.findAndCount(
    Suppression,
    { projectId, ...(q.email ? { email: q.email } : {}), ...(q.reason ? { reason: q.reason } : {}) },
    { orderBy: [{ createdAt: 'DESC' }, { email: 'ASC' }], limit: q.pageSize, offset: (q.page - 1) * q.pageSize },
  );
  return { data: rows.map(toSuppressionDto), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
}

/** POST /suppressions: the addresses (lower case already) listed with reason MANUAL; one listed already keeps its entry. */
export async function addManualSuppressions(em: EntityManager, projectId: string, emails: string[]): Promise<{ added: string[]; alreadyListed: string[] }> {
  const unique = [...new Set(emails)];
  const added = new Set(
    await insertSuppressions(
      em,
      projectId,
      unique.map((email) => ({ email, reason: 'MANUAL', detail: 'api' })),
    ),
  );
  return { added: unique.filter((e) => added.has(e)), alreadyListed: unique.filter((e) => !added.has(e)) };
}

/**
 * Lists an address for a bounce or a complaint, in the caller's transaction (the one recording the
 * report): idempotent, so a report recorded twice, or a second one, keeps the first entry.
 */
export async function suppressAutomatically(tx: EntityManager, projectId: string, entry: NewSuppression): Promise<void> {
  await insertSuppressions(tx, projectId, [{ ...entry, email: entry.email.toLowerCase(), detail: entry.detail?.slice(0, 1000) ?? null }]);
}

/** DELETE /suppressions/:email: the only way an address leaves the list. */
export async function deleteSuppression(em: EntityManager, projectId: string, email: string): Promise<void> {
  const removed = await em.nativeDelete(Suppression, { projectId, email });
  if (removed === 0) throw notFound('Suppression');
}

/** POST /suppressions/check: whether mail to the address would be suppressed now, and why. */
export async function checkSuppression(em: EntityManager, projectId: string, email: string) {
  const why = await suppressionVerdict(em, projectId, email);
  if (!why) return { suppressed: false, reason: null };
  return { suppressed: true, reason: why.reason, ...(why.ruleId ? { ruleId: why.ruleId } : {}) };
}

/** `pattern` as a LIKE pattern over the whole (lower-case) address; LIKE's own characters in it are escaped. */
export function likePatternOf(kind: RuleKind, pattern: string): string {
  const literal = pattern.replace(/[\\%_]/g, (c) => `\\${c}`);
  switch (kind) {
    case 'ADDRESS':
      return literal;
    case 'DOMAIN':
      return `%@${literal}`;
    case 'PREFIX':
      return `${literal}%@%`;
    case 'SUFFIX':
      return `%${literal}@%`;
    case 'WILDCARD':
      return literal.replace(/\*/g, '%').replace(/\?/g, '_');
  }
}

export async function listRules(em: EntityManager, projectId: string) {
  const rules = await em.find(SuppressionRule, { projectId }, { orderBy: [{ createdAt: 'ASC' }, { id: 'ASC' }] });
  return { data: rules.map(toRuleDto) };
}

export async function getRule(em: EntityManager, projectId: string, id: string): Promise<SuppressionRule> {
  const rule = await em.findOne(SuppressionRule, { projectId, id });
  if (!rule) throw notFound('Suppression rule');
  return rule;
}

const tooManyRules = () =>
  new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: [{ field: 'kind', message: `A project has at most ${MAX_RULES} suppression rules`, code: 'too_big' }],
  });

export async function createRule(em: EntityManager, projectId: string, input: CreateRule): Promise<SuppressionRule> {
  return transaction(em, async (tx) => {
    // Concurrent creations of one project take turns, so the cap holds.
    await sql(tx, `SELECT pg_advisory_xact_lock(hashtext('suppression_rules'), hashtext(?))`, [projectId]);
    if ((await tx.count(SuppressionRule, { projectId })) >= MAX_RULES) throw tooManyRules();
    const rule = tx.create(SuppressionRule, {
      id: newId(),
      projectId,
      name: input.name,
      kind: input.kind,
      pattern: input.pattern,
      likePattern: likePatternOf(input.kind, input.pattern),
      enabled: input.enabled ?? true,
    });
    await tx.persist(rule).flush();
    return rule;
  });
}

export async function updateRule(em: EntityManager, projectId: string, id: string, patch: UpdateRule): Promise<SuppressionRule> {
  const rule = await getRule(em, projectId, id);
  const kind = patch.kind ?? rule.kind;
  const pattern = patch.pattern ?? rule.pattern;
  const problem = patternProblem(kind, pattern);
  if (problem)
    throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', { errors: [{ field: 'pattern', message: problem, code: 'invalid_string' }] });
  const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
  if (Object.keys(changes).length === 0) return rule;
  em.assign(rule, { ...changes, likePattern: likePatternOf(kind, pattern), updatedAt: new Date() });
  await em.flush();
  return rule;
}

export async function deleteRule(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rule = await getRule(em, projectId, id);
  await em.remove(rule).flush();
}

/** Rows of the export read per statement. */
const EXPORT_PAGE = 5000;

/** A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). */
const csvField = (v: string) => (/[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);

/** GET /suppressions/export: the whole list as CSV `email,reason,createdAt`, in address order, read a page at a time as it is sent. */
export async function* exportSuppressions(em: EntityManager, projectId: string): AsyncGenerator<string> {
  yield 'email,reason,createdAt\n';
  let after: string | null = null;
  for (;;) {
    const rows = await exportPage(em, projectId, after, EXPORT_PAGE);
    if (rows.length === 0) return;
    yield rows.map((r) => `${csvField(r.email)},${r.reason},${new Date(r.created_at).toISOString()}\n`).join('');
    if (rows.length < EXPORT_PAGE) return;
    after = rows[rows.length - 1].email;
  }
}
