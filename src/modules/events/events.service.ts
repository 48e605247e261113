import type { EntityManager } from '@mikro-orm/postgresql';
import { sql, transaction } from '../../db/orm';
import { bucketCounts, ceilHour, type CountRow, countsBetween, DAY_MS, sumByName } from '../activity';
import { badRequest, notFound } from '../../http/errors';
import { resolveDataMap } from '../contacts';
import { upsertContact } from '../contacts';
import { isReservedEventName } from './event-names';
import type { TrackInput } from './events.schemas';
import { type EventRecord, type EventRow, insertEvents, toEventRecord } from './events.store';
import type { TrackBatcher } from './track-batcher';

export interface TrackResult {
  contactId: string;
  event: EventRecord;
  /** Every event this call wrote, the tracked one included. */
  recorded: EventRecord[];
}

/** Upserts the contact (subscribed by default when new), then records the event. */
export async function trackEvent(em: EntityManager, batcher: TrackBatcher, projectId: string, input: TrackInput): Promise<TrackResult> {
  const resolved = resolveDataMap(input.data);
  if (input.subscribed === undefined) {
    const { contactId, event } = await batcher.write({
      projectId,
      email: input.email,
      data: resolved,
      event: { name: input.event, data: resolved.values },
    });
    return { contactId, event, recorded: [event] };
  }
  return transaction(em, async (tx) => {
    const upsert = await upsertContact(tx, projectId, {
      email: input.email,
      subscribed: input.subscribed,
      defaultSubscribed: true,
      data: resolved,
    });
    const [event] = await insertEvents(tx, [{ projectId, contactId: upsert.contact.id, name: input.event, data: resolved.values }]);
    return { contactId: upsert.contact.id, event, recorded: [...upsert.events, event] };
  });
}

const EVENT_COLUMNS = 'id, name, contact_id, data, created_at';

export interface EventListQuery {
  limit: number;
  cursor?: string;
  name?: string;
  contactId?: string;
  since?: Date;
  until?: Date;
}

/**
 * The WHERE clause of a newest-first page of a project's events: its filters, and (separately) the
 * same with the keyset condition after the cursor event (400 INVALID_CURSOR when the project has none).
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
    const [anchor] = await sql<{ created_at: Date }>(em, `SELECT created_at FROM events WHERE project_id = ? AND id = ?`, [projectId, q.cursor]);
    if (!anchor) throw badRequest('Invalid cursor', 'INVALID_CURSOR');
    where.push('(created_at, id) < (?, ?)');
    params.push(anchor.created_at, q.cursor);
  }
  return { filters, filterParams, where, params };
}

/** Newest first, cursor = id of the last event of the page; `total` only on the first page. */
export async function listEvents(em: EntityManager, projectId: string, q: EventListQuery) {
  const { filters, filterParams, where, params } = await eventPageFilter(em, projectId, q);
  const rows = await sql<EventRow>(em, `SELECT ${EVENT_COLUMNS} FROM events WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ?`, [
    ...params,
    q.limit + 1,
  ]);
  const hasMore = rows.length > q.limit;
  const page = rows.slice(0, q.limit).map(toEventRecord);
  let total = 0;
  if (!q.cursor && q.contactId) {
    const [c] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM events WHERE ${filters}`, filterParams);
    total = Number(c.n);
  } else if (!q.cursor) {
    // A project's events can be millions: the total comes from the activity counts, exact all the same.
    const rows = await countsBetween(em, projectId, 'event', q.since ?? new Date(0), q.until ?? ceilHour(new Date()), q.name ? [q.name] : undefined);
    total = rows.reduce((n, r) => n + r.n, 0);
  }
  return { data: page, cursor: page.length ? page[page.length - 1].id : '', hasMore, total };
}

export async function assertContactInProject(em: EntityManager, projectId: string, contactId: string): Promise<void> {
  const [row] = await sql(em, `SELECT 1 FROM contacts WHERE project_id = ? AND id = ?`, [projectId, contactId]);
  if (!row) throw notFound('Contact');
}

/** Distinct names with how often and when last each was recorded, most frequent first (from the activity counts). */
export async function eventNames(em: EntityManager, projectId: string) {
  const counts = sumByName(await bucketCounts(em, projectId, 'event', {}));
  const names = [...counts].filter(([, n]) => n > 0).map(([name]) => name);
  const last = await sql<{ name: string; last: Date }>(
    em,
    `SELECT n.name, (SELECT max(created_at) FROM events WHERE project_id = ? AND name = n.name) AS last FROM unnest(?::text[]) AS n(name)`,
    [projectId, names],
  );
  const lastOf = new Map(last.map((r) => [r.name, r.last]));
  return names
    .map((name) => ({ name, count: counts.get(name)!, lastTrackedAt: new Date(lastOf.get(name)!).toISOString() }))
    .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
}

export async function eventStats(em: EntityManager, projectId: string, now = new Date()) {
  const since = (days: number) => new Date(now.getTime() - days * DAY_MS);
  const sum = (rows: CountRow[]) => rows.reduce((n, r) => n + r.n, 0);
  const all = sumByName(await bucketCounts(em, projectId, 'event', {}));
  const month = sumByName(await countsBetween(em, projectId, 'event', since(30), now));
  // Contacts with at least one event: one index probe per contact, never a pass over the events.
  const [contacts] = await sql<{ n: string }>(
    em,
    `SELECT count(*) AS n FROM contacts c WHERE c.project_id = ? AND EXISTS (SELECT 1 FROM events e WHERE e.project_id = c.project_id AND e.contact_id = c.id)`,
    [projectId],
  );
  return {
    totalEvents: [...all.values()].reduce((a, b) => a + b, 0),
    last24Hours: sum(await countsBetween(em, projectId, 'event', since(1), now)),
    last7Days: sum(await countsBetween(em, projectId, 'event', since(7), now)),
    last30Days: [...month.values()].reduce((a, b) => a + b, 0),
    uniqueEventNames: [...all.values()].filter((n) => n > 0).length,
    uniqueContacts: Number(contacts.n),
    topEvents: [...month]
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .slice(0, 10)
      .map(([name, count]) => ({ name, count })),
  };
}

/** Where an event name is referenced: segment conditions, workflow triggers, WAIT_FOR_EVENT and CONDITION steps. */
export async function eventUsage(em: EntityManager, projectId: string, name: string) {
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
  return { eventName: name, segments, workflows, total: segments.length + workflows.length };
}

export async function deleteEventsByName(em: EntityManager, projectId: string, name: string) {
  if (isReservedEventName(name)) {
    throw badRequest(`"${name}" is an event the service records itself and cannot be deleted`, 'RESERVED_EVENT');
  }
  const [row] = await sql<{ n: number }>(em, `WITH d AS (DELETE FROM events WHERE project_id = ? AND name = ? RETURNING 1) SELECT count(*)::int AS n FROM d`, [
    projectId,
    name,
  ]);
  return { eventName: name, deleted: row.n };
}
