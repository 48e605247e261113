import type { EntityManager } from '@mikro-orm/postgresql';
import type { TemporalClient } from '../../../temporal/client';
import { newId } from '../../db/ids';
import { holdUntilCommit, sql, transaction } from '../../db/orm';
import { conflict, notFound, simpleBadRequest } from '../../http/errors';
import { Contact } from '../contacts';
import { type EventRecord, insertEvents, type NewEvent } from '../events';
import { compileCondition, type SegmentRef } from './conditions/compile';
import { loadSegmentRefs } from './conditions/facts';
import { type ConditionTree, ConditionError, validateTree } from './conditions/tree';
import { startSegmentRefresh } from './segment-refresh';

export interface SegmentRow {
  id: string;
  project_id: string;
  name: string;
  description: string | null;
  type: 'DYNAMIC' | 'STATIC';
  condition: ConditionTree | null;
  track_membership: boolean;
  member_count: number;
  member_count_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const toSegmentDto = (s: SegmentRow) => ({
  id: s.id,
  name: s.name,
  description: s.description,
  type: s.type,
  condition: s.type === 'STATIC' ? null : s.condition,
  trackMembership: s.track_membership,
  memberCount: s.member_count,
  memberCountUpdatedAt: s.member_count_at ? new Date(s.member_count_at).toISOString() : null,
  projectId: s.project_id,
  createdAt: new Date(s.created_at).toISOString(),
  updatedAt: new Date(s.updated_at).toISOString(),
});

/** lower-case, trimmed, only word characters, spaces and dashes, spaces to dashes, one dash at a time, none at the ends. */
export function segmentSlug(name: string): string {
  return name
    .toLowerCase()
    .trim()
    .replace(/[^\w\s-]/g, '')
    .replace(/\s+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/**
 * A condition must be valid, and every segment it references must exist in the project without
 * leading back to `selfId` (a segment cannot be defined through itself, however indirectly).
 */
export async function checkCondition(em: EntityManager, projectId: string, condition: unknown, selfId?: string): Promise<ConditionTree> {
  let refs: Set<string>;
  try {
    refs = validateTree(condition);
  } catch (err) {
    if (err instanceof ConditionError) throw simpleBadRequest(`Invalid condition: ${err.message}`);
    throw err;
  }
  const segments = await loadSegmentRefs(em, projectId);
  const seen = new Set<string>();
  const walk = (ids: Iterable<string>) => {
    for (const id of ids) {
      if (id === selfId) throw simpleBadRequest('Invalid condition: a segment cannot refer to itself, directly or through other segments');
      if (seen.has(id)) continue;
      seen.add(id);
      const ref = segments.get(id);
      if (!ref) throw simpleBadRequest(`Invalid condition: segment ${id} does not exist`);
      if (ref.type === 'DYNAMIC' && ref.condition) walk(validateTree(ref.condition));
    }
  };
  walk(refs);
  return condition as ConditionTree;
}

export async function getSegment(em: EntityManager, projectId: string, id: string): Promise<SegmentRow> {
  const [row] = await sql<SegmentRow>(em, `SELECT * FROM segments WHERE project_id = ? AND id = ?`, [projectId, id]);
  if (!row) throw notFound('Segment');
  return row;
}

export async function listSegments(em: EntityManager, projectId: string): Promise<SegmentRow[]> {
  return sql<SegmentRow>(em, `SELECT * FROM segments WHERE project_id = ? ORDER BY created_at, id`, [projectId]);
}

export interface SegmentInput {
  name: string;
  description?: string | null;
  type: 'DYNAMIC' | 'STATIC';
  condition?: ConditionTree | null;
  trackMembership: boolean;
}

/** Creates a segment and starts `segment:<id>`, which keeps its count fresh, in one transaction. */
export async function createRefreshedSegment(em: EntityManager, temporal: TemporalClient, projectId: string, input: SegmentInput): Promise<SegmentRow> {
  return transaction(em, async (tx) => {
    const row = await createSegment(tx, projectId, input);
    // Started before the commit: if it fails nothing is written. Its first activity takes the segment's
    // lock, held here until the commit, so it sees the segment (or, after a rollback, none and ends).
    await holdUntilCommit(tx, segmentLockKey(row.id));
    await startSegmentRefresh(temporal, { id: row.id, projectId });
    return row;
  });
}

export async function createSegment(em: EntityManager, projectId: string, input: SegmentInput): Promise<SegmentRow> {
  const [row] = await sql<SegmentRow>(
    em,
    `INSERT INTO segments (id, project_id, name, description, type, condition, track_membership)
     VALUES (?, ?, ?, ?, ?, ?::jsonb, ?) RETURNING *`,
    [
      newId(),
      projectId,
      input.name,
      input.description ?? null,
      input.type,
      input.type === 'DYNAMIC' ? JSON.stringify(input.condition) : null,
      input.trackMembership,
    ],
  );
  return row;
}

export async function updateSegment(
  em: EntityManager,
  projectId: string,
  id: string,
  patch: { name?: string; description?: string | null; condition?: ConditionTree; trackMembership?: boolean },
): Promise<SegmentRow> {
  const sets: string[] = [];
  const params: unknown[] = [];
  if (patch.name !== undefined) {
    sets.push('name = ?');
    params.push(patch.name);
  }
  if (patch.description !== undefined) {
    sets.push('description = ?');
    params.push(patch.description);
  }
  if (patch.condition !== undefined) {
    sets.push('condition = ?::jsonb');
    params.push(JSON.stringify(patch.condition));
  }
  if (patch.trackMembership !== undefined) {
    sets.push('track_membership = ?');
    params.push(patch.trackMembership);
  }
  if (sets.length === 0) return getSegment(em, projectId, id);
  const [row] = await sql<SegmentRow>(em, `UPDATE segments SET ${sets.join(', ')}, updated_at = now() WHERE project_id = ? AND id = ? RETURNING *`, [
    ...params,
    projectId,
    id,
  ]);
  if (!row) throw notFound('Segment');
  return row;
}

/** Who would miss the segment: campaigns not yet finished that target it, and segments defined through it. */
export async function segmentUsage(em: EntityManager, projectId: string, id: string) {
  const campaigns = await sql<{ id: string; name: string; status: string }>(
    em,
    `SELECT id, name, status FROM campaigns WHERE project_id = ? AND segment_id = ? AND status IN ('DRAFT', 'SCHEDULED', 'SENDING') ORDER BY name`,
    [projectId, id],
  );
  const segments = (await listSegments(em, projectId))
    .filter((s) => s.id !== id && s.type === 'DYNAMIC' && s.condition && safeRefs(s.condition).has(id))
    .map((s) => ({ id: s.id, name: s.name }));
  return { campaigns, segments };
}

function safeRefs(tree: ConditionTree): Set<string> {
  try {
    return validateTree(tree);
  } catch {
    return new Set();
  }
}

export async function deleteSegment(em: EntityManager, projectId: string, id: string): Promise<void> {
  await getSegment(em, projectId, id);
  const usage = await segmentUsage(em, projectId, id);
  if (usage.campaigns.length || usage.segments.length) {
    throw conflict('The segment is used by an active campaign or by another segment', 'SEGMENT_IN_USE', { details: usage });
  }
  await sql(em, `DELETE FROM segments WHERE project_id = ? AND id = ?`, [projectId, id]);
}

/** SQL (on `contacts c`) for the members of a segment: its condition, or its static member list. */
export function membersWhere(segment: SegmentRef, segments: ReadonlyMap<string, SegmentRef>, params: unknown[], now = Date.now()): string {
  if (segment.type === 'STATIC' || !segment.condition) {
    params.push(segment.id);
    return `EXISTS (SELECT 1 FROM segment_memberships m WHERE m.segment_id = ?::uuid AND m.contact_id = c.id AND m.exited_at IS NULL)`;
  }
  return compileCondition(segment.condition, { now, segments: new Map([...segments, [segment.id, segment]]) }, params);
}

export async function segmentContacts(em: EntityManager, segment: SegmentRow, page: number, pageSize: number) {
  const segments = await loadSegmentRefs(em, segment.project_id);
  const params: unknown[] = [segment.project_id];
  const where = `c.project_id = ? AND ${membersWhere(segment, segments, params)}`;
  const [{ n }] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM contacts c WHERE ${where}`, params);
  const rows = await sql(em, `SELECT c.* FROM contacts c WHERE ${where} ORDER BY c.created_at DESC, c.id DESC LIMIT ? OFFSET ?`, [
    ...params,
    pageSize,
    (page - 1) * pageSize,
  ]);
  return { rows: rows.map((r) => em.map(Contact, r)), total: Number(n) };
}

/**
 * Counts members now and caches the count on the segment. No membership writes, no events.
 * The segment's row is locked before counting: every membership writer updates that row last in its
 * transaction, so the count is taken either before such a writer (which then applies its own
 * change) or after its commit. Counting first and then waiting for the row would write back a
 * count that misses the writer's members.
 */
export async function refreshCount(em: EntityManager, segmentId: string): Promise<SegmentRow | undefined> {
  return transaction(em, async (tx) => {
    const [segment] = await sql<SegmentRow>(tx, `SELECT * FROM segments WHERE id = ? FOR UPDATE`, [segmentId]);
    if (!segment) return undefined;
    const segments = await loadSegmentRefs(tx, segment.project_id);
    const params: unknown[] = [segment.project_id];
    const where = membersWhere(segment, segments, params);
    const [row] = await sql<SegmentRow>(
      tx,
      `UPDATE segments SET member_count = (SELECT count(*) FROM contacts c WHERE c.project_id = ? AND ${where}), member_count_at = now()
       WHERE id = ? RETURNING *`,
      [...params, segmentId],
    );
    return row;
  });
}

/** Serialises membership changes of one segment: a full recompute excludes the live updates of single contacts. */
export const segmentLockKey = (segmentId: string) => `segment:${segmentId}`;

export function membershipEvents(segment: Pick<SegmentRow, 'id' | 'name' | 'project_id'>, contactIds: string[], kind: 'entry' | 'exit'): NewEvent[] {
  const name = `segment.${segmentSlug(segment.name)}.${kind}`;
  return contactIds.map((contactId) => ({ projectId: segment.project_id, contactId, name, data: { segmentId: segment.id, segmentName: segment.name } }));
}

/**
 * Recomputes the membership of a tracked dynamic segment against its condition now: who matches and
 * is not a member enters, who is a member and no longer matches exits, each with its event, in one
 * transaction under the segment's exclusive lock. A contact already in the right state changes
 * nothing, so every real change is emitted exactly once however often this runs.
 */
export async function computeMembership(em: EntityManager, segmentId: string): Promise<{ entered: number; exited: number; events: EventRecord[] } | undefined> {
  return transaction(em, async (tx) => {
    await sql(tx, `SELECT pg_advisory_xact_lock(hashtext(?))`, [segmentLockKey(segmentId)]);
    const [segment] = await sql<SegmentRow>(tx, `SELECT * FROM segments WHERE id = ?`, [segmentId]);
    if (!segment) return undefined;
    if (segment.type !== 'DYNAMIC' || !segment.track_membership || !segment.condition) return { entered: 0, exited: 0, events: [] };
    const segments = await loadSegmentRefs(tx, segment.project_id);
    const matchParams: unknown[] = [segment.id, segment.project_id, segment.project_id];
    const match = membersWhere(segment, segments, matchParams);
    const entered = await sql<{ contact_id: string }>(
      tx,
      `INSERT INTO segment_memberships AS m (segment_id, contact_id, project_id, entered_at)
       SELECT ?::uuid, c.id, ?::uuid, now() FROM contacts c WHERE c.project_id = ? AND ${match}
       ON CONFLICT (segment_id, contact_id) DO UPDATE SET entered_at = now(), exited_at = NULL WHERE m.exited_at IS NOT NULL
       RETURNING m.contact_id`,
      matchParams,
    );
    const exitParams: unknown[] = [segment.id];
    const stillMatches = membersWhere(segment, segments, exitParams);
    const exited = await sql<{ contact_id: string }>(
      tx,
      `UPDATE segment_memberships m SET exited_at = now()
       WHERE m.segment_id = ? AND m.exited_at IS NULL
         AND NOT EXISTS (SELECT 1 FROM contacts c WHERE c.id = m.contact_id AND ${stillMatches})
       RETURNING m.contact_id`,
      exitParams,
    );
    const events = await insertEvents(tx, [
      ...membershipEvents(
        segment,
        entered.map((r) => r.contact_id),
        'entry',
      ),
      ...membershipEvents(
        segment,
        exited.map((r) => r.contact_id),
        'exit',
      ),
    ]);
    await sql(
      tx,
      `UPDATE segments SET member_count = (SELECT count(*) FROM segment_memberships WHERE segment_id = ? AND exited_at IS NULL), member_count_at = now() WHERE id = ?`,
      [segment.id, segment.id],
    );
    return { entered: entered.length, exited: exited.length, events };
  });
}

/**
 * Adds contacts to a static segment by email; with `createMissing`, unknown emails become contacts
 * (subscribed unless `subscribed` says otherwise). Members who had left re-enter. A tracked segment
 * records an entry event for each real entry.
 */
export async function addStaticMembers(em: EntityManager, segment: SegmentRow, emails: string[], opts: { createMissing: boolean; subscribed?: boolean }) {
  return transaction(em, async (tx) => {
    await sql(tx, `SELECT pg_advisory_xact_lock(hashtext(?))`, [segmentLockKey(segment.id)]);
    const unique = [...new Set(emails)];
    let created: Array<{ id: string; email: string }> = [];
    if (opts.createMissing) {
      created = await sql<{ id: string; email: string }>(
        tx,
        `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
         SELECT v.id, ?, v.email, ?, '{}'::jsonb, now(), now() FROM unnest(?::uuid[], ?::text[]) AS v(id, email)
         ON CONFLICT (project_id, email) DO NOTHING RETURNING id, email`,
        [segment.project_id, opts.subscribed ?? true, unique.map(() => newId()), unique],
      );
    }
    const contacts = await sql<{ id: string; email: string }>(tx, `SELECT id, email FROM contacts WHERE project_id = ? AND email = ANY(?::text[])`, [
      segment.project_id,
      unique,
    ]);
    const entered = await sql<{ contact_id: string }>(
      tx,
      `INSERT INTO segment_memberships AS m (segment_id, contact_id, project_id, entered_at)
       SELECT ?::uuid, id, ?::uuid, now() FROM unnest(?::uuid[]) AS id
       ON CONFLICT (segment_id, contact_id) DO UPDATE SET entered_at = now(), exited_at = NULL WHERE m.exited_at IS NOT NULL
       RETURNING m.contact_id`,
      [segment.id, segment.project_id, contacts.map((c) => c.id)],
    );
    const events = segment.track_membership
      ? await insertEvents(
          tx,
          membershipEvents(
            segment,
            entered.map((r) => r.contact_id),
            'entry',
          ),
        )
      : [];
    await sql(
      tx,
      `UPDATE segments SET member_count = (SELECT count(*) FROM segment_memberships WHERE segment_id = ? AND exited_at IS NULL), member_count_at = now() WHERE id = ?`,
      [segment.id, segment.id],
    );
    const found = new Set(contacts.map((c) => c.email));
    return {
      result: {
        added: entered.length,
        alreadyMembers: contacts.length - entered.length,
        created: created.length,
        notFound: unique.filter((e) => !found.has(e)),
      },
      events,
      contactIds: [...created.map((c) => c.id), ...entered.map((r) => r.contact_id)],
    };
  });
}

export async function removeStaticMembers(em: EntityManager, segment: SegmentRow, emails: string[]) {
  return transaction(em, async (tx) => {
    await sql(tx, `SELECT pg_advisory_xact_lock(hashtext(?))`, [segmentLockKey(segment.id)]);
    const unique = [...new Set(emails)];
    const exited = await sql<{ contact_id: string; email: string }>(
      tx,
      `UPDATE segment_memberships m SET exited_at = now() FROM contacts c
       WHERE m.segment_id = ? AND m.exited_at IS NULL AND c.id = m.contact_id AND c.project_id = ? AND c.email = ANY(?::text[])
       RETURNING m.contact_id, c.email`,
      [segment.id, segment.project_id, unique],
    );
    const events = segment.track_membership
      ? await insertEvents(
          tx,
          membershipEvents(
            segment,
            exited.map((r) => r.contact_id),
            'exit',
          ),
        )
      : [];
    await sql(
      tx,
      `UPDATE segments SET member_count = (SELECT count(*) FROM segment_memberships WHERE segment_id = ? AND exited_at IS NULL), member_count_at = now() WHERE id = ?`,
      [segment.id, segment.id],
    );
    const removed = new Set(exited.map((r) => r.email));
    return { result: { removed: exited.length, notMembers: unique.filter((e) => !removed.has(e)) }, events, contactIds: exited.map((r) => r.contact_id) };
  });
}
