import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';

export interface NewEvent {
  projectId: string;
  contactId: string;
  name: string;
  data: Record<string, unknown>;
}

export interface EventRecord {
  id: string;
  name: string;
  contactId: string;
  data: Record<string, unknown>;
  createdAt: string;
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

/** Inserts events in one statement inside the caller's transaction. */
export async function insertEvents(em: EntityManager, events: NewEvent[]): Promise<EventRecord[]> {
  if (events.length === 0) return [];
  const rows = await sql<EventRow>(
    em,
    `INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT * , now() FROM unnest(?::uuid[], ?::uuid[], ?::uuid[], ?::text[], ?::jsonb[])
     RETURNING id, name, contact_id, data, created_at`,
    [
      events.map(() => newId()),
      events.map((e) => e.projectId),
      events.map((e) => e.contactId),
      events.map((e) => e.name),
      events.map((e) => JSON.stringify(e.data)),
    ],
  );
  return rows.map(toEventRecord);
}
