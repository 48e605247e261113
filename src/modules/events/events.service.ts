import type { EntityManager } from '@mikro-orm/postgresql';
import { transaction } from '../../db/orm';
import { bucketCounts, ceilHour, type CountRow, countsBetween, DAY_MS, sumByName } from '../feed';
import { badRequest, notFound } from '../../errors';
import { Contact, resolveDataMap, upsertContact } from '../contacts';
import { isReservedEventName } from './event-names';
import { ContactEvent } from './events.entity';
import { contactsWithEvents, countEventsWhere, eventPage, eventPageFilter, eventReferences, lastTrackedAt, toEventRecord } from './events.queries';
import type { TrackInput } from './events.schemas';
import { type EventRecord, insertEvents } from './events.store';
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

export interface EventListQuery {
  limit: number;
  cursor?: string;
  name?: string;
  contactId?: string;
  since?: Date;
  until?: Date;
}

/** Newest first, cursor = id of the last event of the page; `total` only on the first page. */
export async function listEvents(em: EntityManager, projectId: string, q: EventListQuery) {
  const { filters, filterParams, where, params } = await eventPageFilter(em, projectId, q);
  const rows = await eventPage(em, where, params, q.limit + 1);
  const hasMore = rows.length > q.limit;
  const data = rows.slice(0, q.limit).map(toEventRecord);
  let total = 0;
  if (!q.cursor && q.contactId) {
    total = await countEventsWhere(em, filters, filterParams);
  } else if (!q.cursor) {
    // A project's events can be millions: the total comes from the activity counts, exact all the same.
    const rows = await countsBetween(em, projectId, 'event', q.since ?? new Date(0), q.until ?? ceilHour(new Date()), q.name ? [q.name] : undefined);
    total = rows.reduce((n, r) => n + r.n, 0);
  }
  return { data, cursor: data.length ? data[data.length - 1].id : '', hasMore, total };
}

export async function assertContactInProject(em: EntityManager, projectId: string, contactId: string): Promise<void> {
  if ((await em.count(Contact, { projectId, id: contactId })) === 0) throw notFound('Contact');
}

/** Distinct names with how often and when last each was recorded, most frequent first (from the activity counts). */
export async function eventNames(em: EntityManager, projectId: string) {
  const counts = sumByName(await bucketCounts(em, projectId, 'event', {}));
  const names = [...counts].filter(([, n]) => n > 0).map(([name]) => name);
  const lastOf = await lastTrackedAt(em, projectId, names);
  return names
    .map((name) => ({ name, count: counts.get(name)!, lastTrackedAt: new Date(lastOf.get(name)!).toISOString() }))
    .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
}

export async function eventStats(em: EntityManager, projectId: string, now = new Date()) {
  const since = (days: number) => new Date(now.getTime() - days * DAY_MS);
  const sum = (rows: CountRow[]) => rows.reduce((n, r) => n + r.n, 0);
  const all = sumByName(await bucketCounts(em, projectId, 'event', {}));
  const month = sumByName(await countsBetween(em, projectId, 'event', since(30), now));
  return {
    totalEvents: [...all.values()].reduce((a, b) => a + b, 0),
    last24Hours: sum(await countsBetween(em, projectId, 'event', since(1), now)),
    last7Days: sum(await countsBetween(em, projectId, 'event', since(7), now)),
    last30Days: [...month.values()].reduce((a, b) => a + b, 0),
    uniqueEventNames: [...all.values()].filter((n) => n > 0).length,
    uniqueContacts: await contactsWithEvents(em, projectId),
    topEvents: [...month]
      .filter(([, n]) => n > 0)
      .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
      .slice(0, 10)
      .map(([name, count]) => ({ name, count })),
  };
}

/** Where an event name is referenced: segment conditions, workflow triggers, WAIT_FOR_EVENT and CONDITION steps. */
export async function eventUsage(em: EntityManager, projectId: string, name: string) {
  const { segments, workflows } = await eventReferences(em, projectId, name);
  return { eventName: name, segments, workflows, total: segments.length + workflows.length };
}

export async function deleteEventsByName(em: EntityManager, projectId: string, name: string) {
  if (isReservedEventName(name)) {
    throw badRequest(`"${name}" is an event the service records itself and cannot be deleted`, 'RESERVED_EVENT');
  }
  return { eventName: name, deleted: await em.nativeDelete(ContactEvent, { projectId, name }) };
}
