import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../../db/orm';
import type { SegmentRef } from './compile';
import type { ContactFacts } from './evaluate';

/** Every segment of a project as the compilers need them, for following `segment.<id>` references. */
export async function loadSegmentRefs(em: EntityManager, projectId: string): Promise<Map<string, SegmentRef>> {
  const rows = await sql<SegmentRef>(em, `SELECT id, type, condition FROM segments WHERE project_id = ?`, [projectId]);
  return new Map(rows.map((r) => [r.id, r]));
}

/** What the evaluator needs about some contacts: their fields, the last time of each named event, static memberships. */
export async function loadContactFacts(
  em: EntityManager,
  projectId: string,
  contactIds: string[],
  eventNames: Iterable<string>,
): Promise<Map<string, ContactFacts>> {
  const contacts = await sql<{ id: string; email: string; subscribed: boolean; created_at: Date; updated_at: Date; data: Record<string, unknown> }>(
    em,
    `SELECT id, email, subscribed, created_at, updated_at, data FROM contacts WHERE project_id = ? AND id = ANY(?::uuid[])`,
    [projectId, contactIds],
  );
  const names = [...eventNames];
  const events = names.length
    ? await sql<{ contact_id: string; name: string; last: Date }>(
        em,
        `SELECT contact_id, name, max(created_at) AS last FROM events
         WHERE project_id = ? AND contact_id = ANY(?::uuid[]) AND name = ANY(?::text[]) GROUP BY contact_id, name`,
        [projectId, contactIds, names],
      )
    : [];
  const statics = await sql<{ contact_id: string; segment_id: string }>(
    em,
    `SELECT m.contact_id, m.segment_id FROM segment_memberships m JOIN segments s ON s.id = m.segment_id
     WHERE m.contact_id = ANY(?::uuid[]) AND m.exited_at IS NULL AND s.type = 'STATIC'`,
    [contactIds],
  );
  const out = new Map<string, ContactFacts>();
  for (const c of contacts) {
    out.set(c.id, {
      email: c.email,
      subscribed: c.subscribed,
      createdAt: new Date(c.created_at),
      updatedAt: new Date(c.updated_at),
      data: c.data ?? {},
      lastEventAt: new Map(),
      staticSegments: new Set(),
    });
  }
  for (const e of events) (out.get(e.contact_id)?.lastEventAt as Map<string, number>)?.set(e.name, new Date(e.last).getTime());
  for (const m of statics) (out.get(m.contact_id)?.staticSegments as Set<string>)?.add(m.segment_id);
  return out;
}
