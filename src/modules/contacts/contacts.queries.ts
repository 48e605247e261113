import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { EVENT_RECORD_COLUMNS, type EventRecord, type ReturnedEvent, toEventRecord } from '../events';
import { ContactImport } from './contact-imports.entity';
import { Contact } from './contacts.entity';
import type { ResolvedData } from './data-map';

const COLUMNS = 'id, project_id, email, subscribed, snoozed_until, data, created_at, updated_at';

/** A contact's fields that a change writes. */
export type ContactState = Pick<Contact, 'email' | 'subscribed' | 'snoozedUntil' | 'data'>;

// SQL, hot path (/v1/send, /v1/track): INSERT ... ON CONFLICT DO NOTHING answering the new row, one prepared statement.
export async function insertContactIfNew(
  em: EntityManager,
  c: Pick<Contact, 'id' | 'projectId' | 'email' | 'subscribed' | 'data'>,
): Promise<Contact | undefined> {
  const [row] = await sql(
    em,
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?::jsonb, now(), now())
     ON CONFLICT (project_id, email) DO NOTHING
     RETURNING ${COLUMNS}`,
    [c.id, c.projectId, c.email, c.subscribed, JSON.stringify(c.data)],
  );
  return row && em.map(Contact, row);
}

// SQL, hot path: the contact that the insert above found, locked FOR UPDATE, one prepared statement.
export async function lockContactByEmail(em: EntityManager, projectId: string, email: string): Promise<Contact> {
  const [row] = await sql(em, `SELECT ${COLUMNS} FROM contacts WHERE project_id = ? AND email = ? FOR UPDATE`, [projectId, email]);
  return em.map(Contact, row);
}

/**
 * SQL, hot path (every bounce and complaint, and the unsubscribe links): sets a contact's `subscribed`,
 * ending any snooze, under its row lock, in one prepared statement (a data-modifying WITH runs whether or
 * not the query reads it). Answers whether it was subscribed before; nothing for an unknown contact.
 */
export async function setContactSubscribed(
  em: EntityManager,
  id: string,
  subscribed: boolean,
): Promise<{ projectId: string; wasSubscribed: boolean } | undefined> {
  const [row] = await sql<{ project_id: string; was_subscribed: boolean }>(
    em,
    `WITH before AS (SELECT id, project_id, subscribed, snoozed_until FROM contacts WHERE id = ? FOR UPDATE),
     changed AS (
       UPDATE contacts c SET subscribed = ?, snoozed_until = NULL, updated_at = now()
       FROM before WHERE c.id = before.id AND (before.subscribed <> ? OR before.snoozed_until IS NOT NULL)
     )
     SELECT project_id, subscribed AS was_subscribed FROM before`,
    [id, subscribed, subscribed],
  );
  return row && { projectId: row.project_id, wasSubscribed: row.was_subscribed };
}

// SQL, hot path: an upsert's change to the locked contact, one prepared statement answering the row.
export async function saveContactChange(em: EntityManager, id: string, next: ContactState): Promise<Contact> {
  const [row] = await sql(
    em,
    `UPDATE contacts SET email = ?, subscribed = ?, snoozed_until = ?, data = ?::jsonb, updated_at = now()
     WHERE id = ? RETURNING ${COLUMNS}`,
    [next.email, next.subscribed, next.snoozedUntil, JSON.stringify(next.data), id],
  );
  return em.map(Contact, row);
}

export interface ContactEventInput {
  projectId: string;
  email: string;
  data: Pick<ResolvedData, 'set' | 'unset'>;
  event: { name: string; data: Record<string, unknown> };
}

/**
 * SQL, hot path (/v1/track's batcher): upserts each item's contact (subscribed when new, data merged)
 * and records its event, all in one statement. Each (project, email) may appear once: ON CONFLICT
 * cannot change a row twice. Rows are locked in (project, email) order, so concurrent calls cannot
 * deadlock on each other. Answers in the order of `items`. Subscription cannot change here, so no
 * lock beyond the rows' own is needed.
 */
export async function upsertContactsAndInsertEvents(em: EntityManager, items: ContactEventInput[]): Promise<Array<{ contactId: string; event: EventRecord }>> {
  const input = items.map((i) => ({
    project_id: i.projectId,
    email: i.email,
    set_data: i.data.set,
    unset_keys: i.data.unset,
    new_contact_id: newId(),
    event_id: newId(),
    name: i.event.name,
    event_data: i.event.data,
  }));
  const rows = await sql<ReturnedEvent>(
    em,
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset(?::jsonb) AS x(project_id uuid, email text, set_data jsonb, unset_keys text[],
         new_contact_id uuid, event_id uuid, name text, event_data jsonb)
       ORDER BY project_id, email
     ), c AS (
       INSERT INTO contacts AS t (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT new_contact_id, project_id, email, true, set_data, now(), now() FROM input
       ON CONFLICT (project_id, email) DO UPDATE
         SET data = (t.data || EXCLUDED.data) - (SELECT unset_keys FROM input i WHERE i.project_id = t.project_id AND i.email = t.email),
             updated_at = CASE
               WHEN (t.data || EXCLUDED.data) - (SELECT unset_keys FROM input i WHERE i.project_id = t.project_id AND i.email = t.email) = t.data
               THEN t.updated_at ELSE now() END
       RETURNING t.id, t.project_id, t.email
     )
     INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT i.event_id, i.project_id, c.id, i.name, i.event_data, now() FROM input i JOIN c ON c.project_id = i.project_id AND c.email = i.email
     RETURNING ${EVENT_RECORD_COLUMNS}`,
    [JSON.stringify(input)],
  );
  const byEvent = new Map(rows.map((r) => [r.id, r]));
  return input.map((i) => {
    const row = byEvent.get(i.event_id)!;
    return { contactId: row.contactId, event: toEventRecord(row) };
  });
}

// SQL, a bulk job's chunk: one set-based DELETE that answers which of the ids were the project's.
export async function deleteContactsIn(em: EntityManager, projectId: string, ids: string[]): Promise<string[]> {
  const rows = await sql<{ id: string }>(em, `DELETE FROM contacts WHERE project_id = ? AND id = ANY(?::uuid[]) RETURNING id`, [projectId, ids]);
  return rows.map((r) => r.id);
}

// SQL, an aggregate over two tables: what the fold has counted plus the deltas not yet folded.
export async function contactTotal(em: EntityManager, projectId: string): Promise<number> {
  const [c] = await sql<{ n: string }>(
    em,
    `SELECT (SELECT coalesce(sum(n), 0) FROM contact_counts WHERE project_id = ?)
          + (SELECT coalesce(sum(n), 0) FROM contact_count_deltas WHERE project_id = ?) AS n`,
    [projectId, projectId],
  );
  return Number(c.n);
}

// SQL, an aggregate over jsonb_each: how many of the project's contacts have each data key, by JSON type.
export function dataKeyTypes(em: EntityManager, projectId: string) {
  return sql<{ name: string; type: string; n: number }>(
    em,
    `SELECT e.key AS name, jsonb_typeof(e.value) AS type, count(*)::int AS n
     FROM contacts c, jsonb_each(c.data) AS e WHERE c.project_id = ? AND jsonb_typeof(e.value) <> 'null'
     GROUP BY 1, 2`,
    [projectId],
  );
}

// SQL, an aggregate grouped by a jsonb value.
export function fieldValueCounts(em: EntityManager, projectId: string, field: string, limit: number) {
  return sql<{ value: unknown; count: number }>(
    em,
    `SELECT data -> ? AS value, count(*)::int AS count FROM contacts
     WHERE project_id = ? AND jsonb_exists(data, ?) AND jsonb_typeof(data -> ?) <> 'null'
     GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT ?`,
    [field, projectId, field, field, limit],
  );
}

/**
 * SQL: jsonpath over the condition trees of segments and campaigns, and JSON fields of workflow steps
 * (other modules' tables). Campaigns come with their content, for the caller to look for variables.
 */
export async function fieldReferences(em: EntityManager, projectId: string, field: string) {
  const path = `data.${field}`;
  // As a filter's field at any depth of a condition tree: exactly "data.<field>", or a nested path under it.
  // (A filter value that merely reads "data.<field>" is no reference.)
  const inCondition = (column: string) =>
    `jsonb_path_exists(${column}, '$.**.filters[*].field \\? (@ == $f || @ starts with $p)', jsonb_build_object('f', ?::text, 'p', ?::text))`;
  const segments = await sql<{ id: string; name: string }>(
    em,
    `SELECT id, name FROM segments WHERE project_id = ? AND ${inCondition('condition')} ORDER BY name`,
    [projectId, path, `${path}.`],
  );
  const campaigns = await sql<{ id: string; name: string; subject: string; body: string; in_filter: boolean }>(
    em,
    `SELECT id, name, subject, body, coalesce(${inCondition('audience_condition')}, false) AS in_filter FROM campaigns WHERE project_id = ? ORDER BY name`,
    [path, `${path}.`, projectId],
  );
  const workflows = await sql<{ id: string; name: string; usedAs: string }>(
    em,
    `SELECT DISTINCT w.id, w.name, lower(s.type) AS "usedAs" FROM workflows w JOIN workflow_steps s ON s.workflow_id = w.id
     WHERE w.project_id = ? AND ((s.type = 'CONDITION' AND (s.config->>'field' = ? OR starts_with(s.config->>'field', ?)))
       OR (s.type = 'UPDATE_CONTACT' AND jsonb_exists(coalesce(s.config->'updates', '{}'::jsonb), ?)))
     ORDER BY 2, 3`,
    [projectId, path, `${path}.`, field],
  );
  return { segments, campaigns, workflows };
}

// SQL: one set-based UPDATE of every contact that has the key, answering which.
export async function removeDataKey(em: EntityManager, projectId: string, field: string): Promise<string[]> {
  const rows = await sql<{ id: string }>(
    em,
    `UPDATE contacts SET data = data - ?::text, updated_at = now() WHERE project_id = ? AND jsonb_exists(data, ?) RETURNING id`,
    [field, projectId, field],
  );
  return rows.map((r) => r.id);
}

// SQL: the uploaded file goes into bytea a piece at a time (content || piece), never whole in memory.
export async function appendImportContent(em: EntityManager, id: string, piece: Buffer): Promise<void> {
  await sql(em, `UPDATE contact_imports SET content = content || ? WHERE id = ?`, [piece, id]);
}

const IMPORT_COLUMNS = `id, project_id, filename, size_bytes, status, offset_bytes, next_line, columns, email_column, rows, created, updated,
  invalid, errors, error, created_at, updated_at, completed_at, topic_ids, double_opt_in`;

// SQL: the import, locked, with the next slice of its file cut out by PostgreSQL (substring of the bytea).
export async function lockImportSlice(em: EntityManager, id: string, bytes: number): Promise<{ job: ContactImport; piece: Buffer } | undefined> {
  const [row] = await sql<Record<string, unknown> & { piece: Buffer }>(
    em,
    `SELECT ${IMPORT_COLUMNS}, substring(content FROM offset_bytes + 1 FOR ?) AS piece FROM contact_imports WHERE id = ? FOR UPDATE`,
    [bytes, id],
  );
  if (!row) return undefined;
  const { piece, ...job } = row;
  return { job: em.map(ContactImport, job), piece };
}

// SQL: ends the import and drops its file in one statement.
export async function failImport(em: EntityManager, id: string, error: string): Promise<void> {
  await sql(em, `UPDATE contact_imports SET status = 'FAILED', error = ?, content = NULL, updated_at = now(), completed_at = now() WHERE id = ?`, [error, id]);
}

/**
 * SQL: a slice's contacts in one set-based INSERT ... ON CONFLICT DO UPDATE (new ones subscribed,
 * existing ones get the fields merged into their data), locking in email order; answers each
 * contact's id and whether it was created.
 */
export async function mergeImportedContacts(em: EntityManager, projectId: string, contacts: Map<string, Record<string, unknown>>) {
  return sql<{ id: string; created: boolean }>(
    em,
    `INSERT INTO contacts AS t (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT x.id, ?, x.email, true, x.data, now(), now()
     FROM jsonb_to_recordset(?::jsonb) AS x(id uuid, email text, data jsonb) ORDER BY x.email
     ON CONFLICT (project_id, email) DO UPDATE
       SET data = t.data || EXCLUDED.data,
           updated_at = CASE WHEN t.data || EXCLUDED.data = t.data THEN t.updated_at ELSE now() END
     RETURNING t.id, (xmax = 0) AS created`,
    [projectId, JSON.stringify([...contacts].map(([email, data]) => ({ id: newId(), email, data })))],
  );
}

export interface ImportProgress {
  consumedBytes: number;
  nextLine: number;
  columns: string[];
  emailColumn: number;
  rows: number;
  created: number;
  updated: number;
  errors: Array<{ line: number; error: string }>;
  /** Errors beyond these are counted, not kept. */
  keptErrors: number;
  final: boolean;
}

// SQL: a slice's progress in one statement, which at the end drops the file (a lazy bytea the entity never loads).
export async function recordImportProgress(em: EntityManager, id: string, p: ImportProgress): Promise<void> {
  await sql(
    em,
    `UPDATE contact_imports SET
       offset_bytes = offset_bytes + ?, next_line = ?, columns = ?::text[], email_column = ?,
       rows = rows + ?, created = created + ?, updated = updated + ?, invalid = invalid + ?,
       errors = errors || ?::jsonb,
       status = ?, content = CASE WHEN ? THEN NULL ELSE content END,
       updated_at = now(), completed_at = CASE WHEN ? THEN now() END
     WHERE id = ?`,
    [
      p.consumedBytes,
      p.nextLine,
      p.columns,
      p.emailColumn,
      p.rows,
      p.created,
      p.updated,
      p.errors.length,
      JSON.stringify(p.errors.slice(0, p.keptErrors)),
      p.final ? 'COMPLETED' : 'RUNNING',
      p.final,
      p.final,
      id,
    ],
  );
}

/** A contact as a list page reads it: the entity's fields, without the entity. */
export type ContactListRow = Pick<Contact, 'id' | 'email' | 'subscribed' | 'snoozedUntil' | 'data' | 'createdAt' | 'updatedAt'>;

/**
 * SQL, measured (`npm run bench:audience`): a page of `GET /contacts` at a million contacts, which the
 * QueryBuilder and entity hydration made two to three times slower. `where` holds fixed SQL fragments
 * with `?` for `params`; no user text becomes SQL. Undefined when the cursor names no contact.
 */
export async function contactPage(
  em: EntityManager,
  projectId: string,
  q: { where: string[]; params: unknown[]; sort: 'createdAt' | 'email'; dir: 'asc' | 'desc'; cursor?: string; limit: number },
): Promise<ContactListRow[] | undefined> {
  const column = q.sort === 'email' ? 'email' : 'created_at';
  const where = [...q.where];
  const params = [...q.params];
  if (q.cursor) {
    // The anchor's value as PostgreSQL has it: a Date would drop the microseconds of created_at.
    const [anchor] = await sql<{ v: unknown }>(em, `SELECT ${column} AS v FROM contacts WHERE project_id = ? AND id = ?`, [projectId, q.cursor]);
    if (!anchor) return undefined;
    where.push(`(${column}, id) ${q.dir === 'asc' ? '>' : '<'} (?, ?)`);
    params.push(anchor.v, q.cursor);
  }
  const order = q.dir === 'asc' ? 'ASC' : 'DESC';
  const rows = await sql<ContactListRow>(
    em,
    `SELECT id, email, subscribed, snoozed_until AS "snoozedUntil", data, created_at AS "createdAt", updated_at AS "updatedAt"
     FROM contacts WHERE ${where.join(' AND ')} ORDER BY ${column} ${order}, id ${order} LIMIT ?`,
    [...params, q.limit],
  );
  return rows.map((r) => ({
    ...r,
    snoozedUntil: r.snoozedUntil && new Date(r.snoozedUntil),
    createdAt: new Date(r.createdAt),
    updatedAt: new Date(r.updatedAt),
  }));
}

/** SQL: the filtered total of a contacts page's first request. */
export async function countContactsWhere(em: EntityManager, where: string[], params: unknown[]): Promise<number> {
  const [{ n }] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM contacts WHERE ${where.join(' AND ')}`, params);
  return Number(n);
}
