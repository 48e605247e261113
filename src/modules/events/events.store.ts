import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import type { EventRecord } from '../../bus/contact-activity';

export type { EventRecord };

export interface NewEvent {
  projectId: string;
  contactId: string;
  name: string;
  data: Record<string, unknown>;
}

export interface EventRow {
  id: string;
  name: string;
  contact_id: string;
  data: Record<string, unknown>;
  created_at: Date;
}

export const toEventRecord = (r: EventRow): EventRecord => ({
  id: r.id,
  name: r.name,
  contactId: r.contact_id,
  data: r.data ?? {},
  createdAt: new Date(r.created_at).toISOString(),
});

/** Events held back by `insertEventsTogether`, by the transaction they belong to. */
const heldBack = new WeakMap<EntityManager, Array<{ event: NewEvent; record: EventRecord }>>();

/** Inserts events in one statement inside the caller's transaction. */
export async function insertEvents(em: EntityManager, events: NewEvent[]): Promise<EventRecord[]> {
  if (events.length === 0) return [];
  const held = heldBack.get(em);
  if (held) {
    // Written by insertEventsTogether before the commit, which fills in createdAt then.
    const records = events.map((e) => ({ id: newId(), name: e.name, contactId: e.contactId, data: e.data, createdAt: '' }));
    held.push(...events.map((event, i) => ({ event, record: records[i] })));
    return records;
  }
  const ids = events.map(() => newId());
  return (await writeEvents(em, events, ids)).map(toEventRecord);
}

async function writeEvents(em: EntityManager, events: NewEvent[], ids: string[]): Promise<EventRow[]> {
  return sql<EventRow>(
    em,
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT * , now() FROM unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::text[], ?::jsonb[])
     RETURNING id, name, contact_id, data, created_at`,
    [ids, events.map((e) => e.projectId), events.map((e) => e.contactId), events.map((e) => e.name), events.map((e) => JSON.stringify(e.data))],
  );
}

/**
 * Runs `fn` in the transaction `tx` with every event it inserts written in one statement at its end:
 * the statement triggers on `events` (automation routing, webhook routing, counts) then run once for
 * the lot instead of once per insert. For a batch of many small writes; the events are in the
 * transaction, and their records complete, by the time it returns.
 */
export async function insertEventsTogether<T>(tx: EntityManager, fn: () => Promise<T>): Promise<T> {
  if (heldBack.has(tx)) return fn();
  const held: Array<{ event: NewEvent; record: EventRecord }> = [];
  heldBack.set(tx, held);
  try {
    const result = await fn();
    heldBack.delete(tx);
    if (held.length) {
      const rows = await writeEvents(
        tx,
        held.map((h) => h.event),
        held.map((h) => h.record.id),
      );
      const createdAt = new Map(rows.map((r) => [r.id, new Date(r.created_at).toISOString()]));
      for (const h of held) h.record.createdAt = createdAt.get(h.record.id)!;
    }
    return result;
  } finally {
    heldBack.delete(tx);
  }
}
