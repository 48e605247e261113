import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { Contact } from '../contacts';
import { compileCondition, type SegmentRef } from './conditions/compile';
import { Segment } from './segments.entity';

/**
 * The segments module's hand-written SQL: membership is computed set-based, from a condition compiled
 * to one parameterised query, under advisory locks; segment definitions go through the EntityManager.
 * Statements that change a segment's row return it whole, for the caller to merge (`em.map`).
 */

/** SQL (on `contacts c`) for the members of a segment: its condition, or its static member list. */
export function membersWhere(segment: SegmentRef, segments: ReadonlyMap<string, SegmentRef>, params: unknown[], now = Date.now()): string {
  if (segment.type === 'STATIC' || !segment.condition) {
    params.push(segment.id);
    return `EXISTS (SELECT 1 FROM segment_memberships m WHERE m.segment_id = ?::uuid AND m.contact_id = c.id AND m.exited_at IS NULL)`;
  }
  return compileCondition(segment.condition, { now, segments: new Map([...segments, [segment.id, segment]]) }, params);
}

/** Serialises membership changes of one segment: a full recompute excludes the live updates of single contacts. */
export const segmentLockKey = (segmentId: string) => `segment:${segmentId}`;

/**
 * The project's dynamic segments whose membership is tracked live. SQL: it runs on every debounce of
 * contact activity (each /v1/send), where MikroORM's find costs more than the statement itself.
 */
export async function trackedSegments(em: EntityManager, projectId: string): Promise<Segment[]> {
  const rows = await sql(em, `SELECT * FROM segments WHERE project_id = ? AND type = 'DYNAMIC' AND track_membership AND condition IS NOT NULL ORDER BY id`, [
    projectId,
  ]);
  return rows.map((r) => em.map(Segment, r));
}

/** Takes the segment's membership lock until the transaction ends: advisory locks have no EntityManager API. */
export async function lockMembership(tx: EntityManager, segmentId: string, mode: 'exclusive' | 'shared'): Promise<void> {
  const fn = mode === 'exclusive' ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared';
  await sql(tx, `SELECT ${fn}(hashtext(?))`, [segmentLockKey(segmentId)]);
}

/** The contacts (`c`) that are the segment's members now: a condition over the project's contacts, and its parameters. */
function matching(segment: Segment, segments: ReadonlyMap<string, SegmentRef>): { where: string; params: unknown[] } {
  const params: unknown[] = [segment.projectId];
  return { where: `c.project_id = ? AND ${membersWhere(segment, segments, params)}`, params };
}

/**
 * How many contacts are the segment's members now. A statement of its own, never a subquery of a write:
 * PostgreSQL runs a query that writes without parallel workers, and a count over a large audience needs them.
 */
async function countMatching(em: EntityManager, { where, params }: { where: string; params: unknown[] }): Promise<number> {
  const [{ n }] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM contacts c WHERE ${where}`, params);
  return Number(n);
}

/** A page of the segment's members now, and how many there are: the condition compiles to SQL over contacts. */
export async function memberPage(em: EntityManager, segment: Segment, segments: ReadonlyMap<string, SegmentRef>, page: number, pageSize: number) {
  const members = matching(segment, segments);
  const total = await countMatching(em, members);
  const rows = await sql(em, `SELECT c.* FROM contacts c WHERE ${members.where} ORDER BY c.created_at DESC, c.id DESC LIMIT ? OFFSET ?`, [
    ...members.params,
    pageSize,
    (page - 1) * pageSize,
  ]);
  return { rows: rows.map((r) => em.map(Contact, r)), total };
}

/** Counts the contacts matching now and stores the count; answers the segment's row. */
export async function storeMatchingCount(tx: EntityManager, segment: Segment, segments: ReadonlyMap<string, SegmentRef>) {
  const n = await countMatching(tx, matching(segment, segments));
  const [row] = await sql(tx, `UPDATE segments SET member_count = ?, member_count_at = now() WHERE id = ? RETURNING *`, [n, segment.id]);
  return row;
}

/** Stores the count of current members, in one statement; answers the segment's row. */
export async function storeMemberCount(tx: EntityManager, segmentId: string) {
  const [row] = await sql(
    tx,
    `UPDATE segments SET member_count = (SELECT count(*) FROM segment_memberships WHERE segment_id = ? AND exited_at IS NULL), member_count_at = now()
     WHERE id = ? RETURNING *`,
    [segmentId, segmentId],
  );
  return row;
}

/** Adds `delta` to the member count: an increment in place, as live evaluations of one segment run side by side. */
export async function addToMemberCount(tx: EntityManager, segmentId: string, delta: number): Promise<void> {
  await sql(tx, `UPDATE segments SET member_count = member_count + ?, member_count_at = now() WHERE id = ?`, [delta, segmentId]);
}

/** Every matching contact not yet a member enters: one INSERT ... SELECT over the compiled condition; answers who entered. */
export async function enterMatching(tx: EntityManager, segment: Segment, segments: ReadonlyMap<string, SegmentRef>): Promise<string[]> {
  const params: unknown[] = [segment.id, segment.projectId, segment.projectId];
  const match = membersWhere(segment, segments, params);
  const rows = await sql<{ contact_id: string }>(
    tx,
    `INSERT INTO segment_memberships AS m (segment_id, contact_id, project_id, entered_at)
     SELECT ?::uuid, c.id, ?::uuid, now() FROM contacts c WHERE c.project_id = ? AND ${match}
     ON CONFLICT (segment_id, contact_id) DO UPDATE SET entered_at = now(), exited_at = NULL WHERE m.exited_at IS NOT NULL
     RETURNING m.contact_id`,
    params,
  );
  return rows.map((r) => r.contact_id);
}

/** Every member who no longer matches exits: one UPDATE over the compiled condition; answers who exited. */
export async function exitUnmatched(tx: EntityManager, segment: Segment, segments: ReadonlyMap<string, SegmentRef>): Promise<string[]> {
  const params: unknown[] = [segment.id];
  const stillMatches = membersWhere(segment, segments, params);
  const rows = await sql<{ contact_id: string }>(
    tx,
    `UPDATE segment_memberships m SET exited_at = now()
     WHERE m.segment_id = ? AND m.exited_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM contacts c WHERE c.id = m.contact_id AND ${stillMatches})
     RETURNING m.contact_id`,
    params,
  );
  return rows.map((r) => r.contact_id);
}

/**
 * The contacts enter; former members re-enter. Answers only real entries: an upsert whose update is
 * conditional and whose RETURNING leaves out those already in, which em.upsert cannot say.
 */
export async function enterMembers(tx: EntityManager, segmentId: string, projectId: string, contactIds: string[]): Promise<string[]> {
  const rows = await sql<{ contact_id: string }>(
    tx,
    `INSERT INTO segment_memberships AS m (segment_id, contact_id, project_id, entered_at)
     SELECT ?::uuid, id, ?::uuid, now() FROM unnest(?::uuid[]) AS id
     ON CONFLICT (segment_id, contact_id) DO UPDATE SET entered_at = now(), exited_at = NULL WHERE m.exited_at IS NOT NULL
     RETURNING m.contact_id`,
    [segmentId, projectId, contactIds],
  );
  return rows.map((r) => r.contact_id);
}

/** The contacts who are members exit. Answers who really exited, which nativeUpdate (a count) does not. */
export async function exitMembers(tx: EntityManager, segmentId: string, contactIds: string[]): Promise<string[]> {
  const rows = await sql<{ contact_id: string }>(
    tx,
    `UPDATE segment_memberships SET exited_at = now() WHERE segment_id = ? AND contact_id = ANY(?::uuid[]) AND exited_at IS NULL RETURNING contact_id`,
    [segmentId, contactIds],
  );
  return rows.map((r) => r.contact_id);
}

/** The members with these emails exit: an UPDATE joined to contacts by email, answering who exited with which email. */
export async function exitMembersByEmail(tx: EntityManager, segment: Segment, emails: string[]) {
  return sql<{ contact_id: string; email: string }>(
    tx,
    `UPDATE segment_memberships m SET exited_at = now() FROM contacts c
     WHERE m.segment_id = ? AND m.exited_at IS NULL AND c.id = m.contact_id AND c.project_id = ? AND c.email = ANY(?::text[])
     RETURNING m.contact_id, c.email`,
    [segment.id, segment.projectId, emails],
  );
}

/** Current memberships of these contacts in these segments: read on every live evaluation, as plain pairs. */
export async function currentMemberships(tx: EntityManager, segmentIds: string[], contactIds: string[]) {
  return sql<{ segment_id: string; contact_id: string }>(
    tx,
    `SELECT segment_id, contact_id FROM segment_memberships
     WHERE segment_id = ANY(?::uuid[]) AND contact_id = ANY(?::uuid[]) AND exited_at IS NULL`,
    [segmentIds, contactIds],
  );
}

/**
 * Emails not yet contacts become contacts: ON CONFLICT DO NOTHING answers only the new ones, so a
 * concurrent insert of the same email is found rather than failing the transaction.
 */
export async function createMissingContacts(tx: EntityManager, projectId: string, emails: string[], subscribed: boolean) {
  return sql<{ id: string; email: string }>(
    tx,
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     SELECT v.id, ?, v.email, ?, '{}'::jsonb, now(), now() FROM unnest(?::uuid[], ?::text[]) AS v(id, email)
     ON CONFLICT (project_id, email) DO NOTHING RETURNING id, email`,
    [projectId, subscribed, emails.map(() => newId()), emails],
  );
}

/*
 * What the in-memory evaluator reads (conditions/facts.ts): on every live-membership evaluation of a
 * batch of events, so each is one read for the whole batch of contacts.
 */

/** Every segment of a project as the compilers need them. */
export function segmentRefs(em: EntityManager, projectId: string): Promise<SegmentRef[]> {
  return sql<SegmentRef>(em, `SELECT id, type, condition FROM segments WHERE project_id = ?`, [projectId]);
}

/** The fields of some contacts a condition can test. */
export function contactFactRows(
  em: EntityManager,
  projectId: string,
  contactIds: string[],
): Promise<Array<{ id: string; email: string; subscribed: boolean; created_at: Date; updated_at: Date; data: Record<string, unknown> }>> {
  return sql<{ id: string; email: string; subscribed: boolean; created_at: Date; updated_at: Date; data: Record<string, unknown> }>(
    em,
    `SELECT id, email, subscribed, created_at, updated_at, data FROM contacts WHERE project_id = ? AND id = ANY(?::uuid[])`,
    [projectId, contactIds],
  );
}

/** Which of some contacts receive which of some topics, defaults applied: SQL, as it reads the topics module's tables. */
export function subscribedTopicRows(em: EntityManager, projectId: string, contactIds: string[], topicIds: string[]) {
  return sql<{ contact_id: string; topic_id: string }>(
    em,
    `SELECT c.id AS contact_id, t.id AS topic_id FROM topics t CROSS JOIN unnest(?::uuid[]) AS c(id)
     LEFT JOIN contact_topics ct ON ct.contact_id = c.id AND ct.topic_id = t.id
     WHERE t.project_id = ? AND t.id = ANY(?::uuid[]) AND coalesce(ct.state = 'subscribed', t.default_subscription = 'opt_in')`,
    [contactIds, projectId, topicIds],
  );
}

/** The last time each of some contacts had each named event: an aggregate. */
export function lastEventTimes(
  em: EntityManager,
  projectId: string,
  contactIds: string[],
  names: string[],
): Promise<Array<{ contact_id: string; name: string; last: Date }>> {
  return sql<{ contact_id: string; name: string; last: Date }>(
    em,
    `SELECT contact_id, name, max(created_at) AS last FROM events
     WHERE project_id = ? AND contact_id = ANY(?::uuid[]) AND name = ANY(?::text[]) GROUP BY contact_id, name`,
    [projectId, contactIds, names],
  );
}

/** The static segments some contacts are members of. */
export function staticMemberships(em: EntityManager, contactIds: string[]): Promise<Array<{ contact_id: string; segment_id: string }>> {
  return sql<{ contact_id: string; segment_id: string }>(
    em,
    `SELECT m.contact_id, m.segment_id FROM segment_memberships m JOIN segments s ON s.id = m.segment_id
     WHERE m.contact_id = ANY(?::uuid[]) AND m.exited_at IS NULL AND s.type = 'STATIC'`,
    [contactIds],
  );
}
