import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import type { EventRecord } from '../../bus/contact-activity';
import { insertEventRows, type NewEvent } from './events.queries';

export type { EventRecord, NewEvent };

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
  return insertEventRows(
    em,
    events,
    events.map(() => newId()),
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
      const written = await insertEventRows(
        tx,
        held.map((h) => h.event),
        held.map((h) => h.record.id),
      );
      const createdAt = new Map(written.map((r) => [r.id, r.createdAt]));
      for (const h of held) h.record.createdAt = createdAt.get(h.record.id)!;
    }
    return result;
  } finally {
    heldBack.delete(tx);
  }
}
