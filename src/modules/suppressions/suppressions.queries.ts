import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import type { SuppressionReason } from './suppressions.entity';

/**
 * The suppressions module's hand-written SQL. Whether an address is suppressed is asked on every path
 * that sends (a send, a delivery claim, a campaign's audience), so it is an SQL expression those
 * statements embed rather than a round trip of its own: a primary-key lookup in the list, then the
 * project's enabled rules, each a LIKE pattern made when the rule was written. LIKE has no backtracking
 * beyond its last `%`, so no pattern a client writes makes matching slow.
 */

/** Why a suppressed address is: an entry's reason, or RULE with the first matching rule's id. */
export interface SuppressionVerdict {
  reason: SuppressionReason | 'RULE';
  ruleId?: string;
}

/**
 * SQL for why the address `email` (an SQL expression, lower case) is suppressed in `project` (an SQL
 * expression): jsonb `{reason, ruleId?}` (a `SuppressionVerdict`), or NULL when it is not. The list
 * wins over the rules; among rules, the oldest.
 */
export const suppressionOf = (email: string, project: string) =>
  // Aliases no caller's statement uses, so `email` and `project` always mean the caller's columns.
  `coalesce(
     (SELECT jsonb_build_object('reason', sup_entry.reason) FROM suppressions sup_entry
       WHERE sup_entry.project_id = ${project} AND sup_entry.email = ${email}),
     (SELECT jsonb_build_object('reason', 'RULE', 'ruleId', sup_rule.id) FROM suppression_rules sup_rule
       WHERE sup_rule.project_id = ${project} AND sup_rule.enabled AND ${email} LIKE sup_rule.like_pattern
       ORDER BY sup_rule.created_at, sup_rule.id LIMIT 1))`;

/**
 * SQL for which of the addresses `emails` (an SQL text[] expression, each lower case, used twice) are
 * suppressed in `project`: a jsonb array of `{email, reason, ruleId?}`, the list's entries first, then
 * each address's oldest matching rule. Two flat subqueries rather than `suppressionOf` per address: a
 * send plans this statement every time, and the correlated form cost PostgreSQL several times as much.
 */
export const suppressedAmong = (emails: string, project: string) =>
  `((SELECT coalesce(jsonb_agg(jsonb_build_object('email', sup_entry.email, 'reason', sup_entry.reason)), '[]') FROM suppressions sup_entry
      WHERE sup_entry.project_id = ${project} AND sup_entry.email = ANY(${emails}))
    || (SELECT coalesce(jsonb_agg(jsonb_build_object('email', sup_match.email, 'reason', 'RULE', 'ruleId', sup_match.id)), '[]') FROM
        (SELECT DISTINCT ON (sup_to.email) sup_to.email, sup_rule.id
         FROM suppression_rules sup_rule JOIN unnest(${emails}) sup_to(email) ON sup_to.email LIKE sup_rule.like_pattern
         WHERE sup_rule.project_id = ${project} AND sup_rule.enabled ORDER BY sup_to.email, sup_rule.created_at, sup_rule.id) sup_match))`;

/**
 * SQL (on `contacts c`) for the contacts that are not suppressed: an anti-join on the list's primary key,
 * and, when the project has enabled rules, none of their patterns (read once here, passed as one array).
 */
export async function notSuppressedWhere(em: EntityManager, projectId: string, params: unknown[]): Promise<string> {
  const rules = await sql<{ like_pattern: string }>(em, `SELECT like_pattern FROM suppression_rules WHERE project_id = ? AND enabled`, [projectId]);
  const listed = 'NOT EXISTS (SELECT 1 FROM suppressions s WHERE s.project_id = c.project_id AND s.email = c.email)';
  if (rules.length === 0) return listed;
  params.push(rules.map((r) => r.like_pattern));
  return `${listed} AND NOT (c.email LIKE ANY(?::text[]))`;
}

/** Why one address is suppressed in the project, or null. */
export async function suppressionVerdict(em: EntityManager, projectId: string, email: string): Promise<SuppressionVerdict | null> {
  const [row] = await sql<{ why: SuppressionVerdict | null }>(
    em,
    `SELECT ${suppressionOf('q.email', 'q.project_id')} AS why FROM (SELECT ?::uuid AS project_id, ?::text AS email) q`,
    [projectId, email],
  );
  return row?.why ?? null;
}

/** One entry to add; `email` lower case. */
export interface NewSuppression {
  email: string;
  reason: SuppressionReason;
  emailId?: string | null;
  detail?: string | null;
}

/**
 * Adds entries in one statement; an address already listed keeps its entry (ON CONFLICT DO NOTHING),
 * so a bounce recorded twice, or an import run again, adds nothing twice. Answers the addresses added.
 */
export async function insertSuppressions(em: EntityManager, projectId: string, entries: NewSuppression[]): Promise<string[]> {
  if (entries.length === 0) return [];
  const rows = await sql<{ email: string }>(
    em,
    `INSERT INTO suppressions (project_id, email, reason, email_id, detail, created_at)
     SELECT ?, v.email, v.reason, v.email_id, v.detail, clock_timestamp()
     FROM unnest(?::text[], ?::text[], ?::uuid[], ?::text[]) WITH ORDINALITY AS v(email, reason, email_id, detail, n)
     ORDER BY v.n
     ON CONFLICT (project_id, email) DO NOTHING
     RETURNING email`,
    [projectId, entries.map((e) => e.email), entries.map((e) => e.reason), entries.map((e) => e.emailId ?? null), entries.map((e) => e.detail ?? null)],
  );
  return rows.map((r) => r.email);
}

/** A page of the list for the export, after `after` (an address), in address order: keyset, so a large list streams in pages. */
export function exportPage(em: EntityManager, projectId: string, after: string | null, size: number) {
  return sql<{ email: string; reason: string; created_at: Date }>(
    em,
    `SELECT email, reason, created_at FROM suppressions WHERE project_id = ? AND email > coalesce(?, '') ORDER BY email LIMIT ?`,
    [projectId, after, size],
  );
}

/** Appends a piece of an uploaded file to its import (a file is stored a piece at a time, never whole in memory). */
export async function appendSuppressionImportContent(em: EntityManager, id: string, piece: Buffer): Promise<void> {
  await sql(em, `UPDATE suppression_imports SET content = content || ? WHERE id = ?`, [piece, id]);
}

/** An import as a step reads it: where it is, and the next slice of its file. */
export interface SuppressionImportSlice {
  project_id: string;
  status: string;
  size_bytes: number;
  offset_bytes: number;
  next_line: number;
  email_column: number | null;
  /** How many row errors the report keeps already. */
  errors_kept: number;
  piece: Buffer;
}

/** The import, locked, with the next slice of its file cut out by PostgreSQL (substring of the bytea). */
export async function lockSuppressionImportSlice(em: EntityManager, id: string, bytes: number): Promise<SuppressionImportSlice | undefined> {
  const [row] = await sql<SuppressionImportSlice>(
    em,
    `SELECT project_id, status, size_bytes, offset_bytes, next_line, email_column, jsonb_array_length(errors) AS errors_kept,
            substring(content FROM offset_bytes + 1 FOR ?) AS piece
     FROM suppression_imports WHERE id = ? FOR UPDATE`,
    [bytes, id],
  );
  return row;
}

export interface SuppressionImportProgress {
  consumedBytes: number;
  nextLine: number;
  emailColumn: number;
  rows: number;
  added: number;
  alreadyListed: number;
  invalid: number;
  /** The row errors to keep (the report keeps the first ones; all are counted in `invalid`). */
  errors: Array<{ line: number; error: string }>;
  final: boolean;
  /** Set when the import cannot go on: it ends FAILED with this. */
  failure?: string;
}

/** A slice's outcome and the position reached, in one statement; the file is dropped once the import ends. */
export async function recordSuppressionImportProgress(em: EntityManager, id: string, p: SuppressionImportProgress): Promise<void> {
  const status = p.failure ? 'FAILED' : p.final ? 'COMPLETED' : 'RUNNING';
  const ended = status !== 'RUNNING';
  await sql(
    em,
    `UPDATE suppression_imports SET
       offset_bytes = offset_bytes + ?, next_line = ?, email_column = ?, rows = rows + ?, added = added + ?,
       already_listed = already_listed + ?, invalid = invalid + ?, errors = errors || ?::jsonb, error = ?,
       status = ?, content = CASE WHEN ? THEN NULL ELSE content END, updated_at = now(), completed_at = CASE WHEN ? THEN now() END
     WHERE id = ?`,
    [
      p.consumedBytes,
      p.nextLine,
      p.emailColumn,
      p.rows,
      p.added,
      p.alreadyListed,
      p.invalid,
      JSON.stringify(p.errors),
      p.failure ?? null,
      status,
      ended,
      ended,
      id,
    ],
  );
}
