import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { badRequest } from '../../errors';
import type { EventRecord } from '../../bus/contact-activity';
import { ContactEvent } from './events.entity';

/** What a statement that writes events returns, named as an EventRecord's fields. */
export const EVENT_RECORD_COLUMNS = `id, name, contact_id AS "contactId", data, created_at AS "createdAt"`;

/** An event entity, or a row read `RETURNING ${EVENT_RECORD_COLUMNS}` (its time as PostgreSQL writes it). */
export type ReturnedEvent = Pick<ContactEvent, 'id' | 'name' | 'contactId' | 'data'> & { createdAt: Date | string };

/** An event as the API and the activity hub show it. */
export const toEventRecord = (e: ReturnedEvent): EventRecord => ({
  id: e.id,
  name: e.name,
  contactId: e.contactId,
  data: e.data ?? {},
  createdAt: new Date(e.createdAt).toISOString(),
});

export interface NewEvent {
  projectId: string;
  contactId: string;
  name: string;
  data: Record<string, unknown>;
}

// SQL: every send, track and delivery outcome writes events; one prepared multi-row INSERT over arrays.
export async function insertEventRows(em: EntityManager, events: NewEvent[], ids: string[]): Promise<EventRecord[]> {
  const rows = await sql<ReturnedEvent>(
    em,
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT * , now() FROM unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::text[], ?::jsonb[])
     RETURNING ${EVENT_RECORD_COLUMNS}`,
    [ids, events.map((e) => e.projectId), events.map((e) => e.contactId), events.map((e) => e.name), events.map((e) => JSON.stringify(e.data))],
  );
  return rows.map(toEventRecord);
}

/**
 * The cursor event's time to the microsecond, as PostgreSQL writes it (a Date would lose the
 * microseconds the keyset compares); 400 INVALID_CURSOR when the project has no such event.
 */
export async function eventCursorAnchor(em: EntityManager, projectId: string, cursor: string): Promise<string> {
  const anchor = await em.createQueryBuilder(ContactEvent).select('createdAt').where({ projectId, id: cursor }).execute<{ created_at: string }>('get', false);
  if (!anchor) throw badRequest('Invalid cursor', 'INVALID_CURSOR');
  return anchor.created_at;
}

/**
 * SQL text: the WHERE clause of a newest-first page of a project's events, which the activity feed
 * splices into a UNION ALL of one index range per type. Its filters, and (separately) the same with
 * the keyset condition after the cursor event.
 */
export async function eventPageFilter(
  em: EntityManager,
  projectId: string,
  q: { name?: string; contactId?: string; since?: Date; until?: Date; cursor?: string },
): Promise<{ filters: string; filterParams: unknown[]; where: string[]; params: unknown[] }> {
  const where = ['project_id = ?'];
  const params: unknown[] = [projectId];
  const add = (clause: string, value: unknown) => {
    where.push(clause);
    params.push(value);
  };
  if (q.name) add('name = ?', q.name);
  if (q.contactId) add('contact_id = ?', q.contactId);
  if (q.since) add('created_at >= ?', q.since);
  if (q.until) add('created_at < ?', q.until);
  const filters = where.join(' AND ');
  const filterParams = [...params];
  if (q.cursor) {
    where.push('(created_at, id) < (?, ?)');
    params.push(await eventCursorAnchor(em, projectId, q.cursor), q.cursor);
  }
  return { filters, filterParams, where, params };
}

// SQL: one correlated max() per name, each an index probe (project, name, created_at).
export async function lastTrackedAt(em: EntityManager, projectId: string, names: string[]): Promise<Map<string, string>> {
  const rows = await sql<{ name: string; last: string }>(
    em,
    `SELECT n.name, (SELECT max(created_at) FROM events WHERE project_id = ? AND name = n.name) AS last FROM unnest(?::text[]) AS n(name)`,
    [projectId, names],
  );
  return new Map(rows.map((r) => [r.name, r.last]));
}

// SQL: contacts with at least one event, one index probe per contact, never a pass over the events.
export async function contactsWithEvents(em: EntityManager, projectId: string): Promise<number> {
  const [row] = await sql<{ n: string }>(
    em,
    `SELECT count(*) AS n FROM contacts c WHERE c.project_id = ? AND EXISTS (SELECT 1 FROM events e WHERE e.project_id = c.project_id AND e.contact_id = c.id)`,
    [projectId],
  );
  return Number(row.n);
}

// SQL: jsonpath over segment conditions and JSON fields of workflow steps, other modules' tables.
export async function eventReferences(em: EntityManager, projectId: string, name: string) {
  // A filter's field at any depth of the tree; a filter value that merely reads "event.<name>" is no reference.
  const segments = await sql<{ id: string; name: string }>(
    em,
    `SELECT id, name FROM segments
     WHERE project_id = ? AND jsonb_path_exists(condition, '$.**.filters[*].field \\? (@ == $f)', jsonb_build_object('f', ?::text))
     ORDER BY name`,
    [projectId, `event.${name}`],
  );
  const workflows = await sql<{ id: string; name: string; usedAs: string }>(
    em,
    `SELECT w.id, w.name, 'trigger' AS "usedAs" FROM workflows w WHERE w.project_id = ? AND w.trigger_config->>'eventName' = ?
     UNION ALL
     SELECT DISTINCT w.id, w.name, lower(s.type) AS "usedAs" FROM workflows w JOIN workflow_steps s ON s.workflow_id = w.id
     WHERE w.project_id = ? AND ((s.type = 'WAIT_FOR_EVENT' AND s.config->>'eventName' = ?) OR (s.type = 'CONDITION' AND s.config->>'field' = ?))
     ORDER BY 2, 3`,
    [projectId, name, projectId, name, `event.${name}`],
  );
  return { segments, workflows };
}

/**
 * SQL, measured (`npm run bench:activity`, "events, first page"): a page of `GET /events`, which the
 * QueryBuilder and entity hydration made slower. `where` comes from `eventPageFilter`.
 */
export function eventPage(em: EntityManager, where: string[], params: unknown[], limit: number): Promise<ReturnedEvent[]> {
  return sql<ReturnedEvent>(em, `SELECT ${EVENT_RECORD_COLUMNS} FROM events WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ?`, [
    ...params,
    limit,
  ]);
}

/** SQL: a contact's events counted, for the first page's total. */
export async function countEventsWhere(em: EntityManager, filters: string, params: unknown[]): Promise<number> {
  const [c] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM events WHERE ${filters}`, params);
  return Number(c.n);
}
