import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { WorkflowStarter } from '../workflow-starter';
import { newId } from '../../db/ids';
import { holdUntilCommit, transaction } from '../../db/orm';
import { conflict, notFound, simpleBadRequest } from '../../errors';
import type { Campaign } from '../campaigns';
import { ContactSchema } from '../contacts';
import { type EventRecord, insertEvents, type NewEvent } from '../events';
import { loadSegmentRefs } from './conditions/facts';
import { type ConditionTree, ConditionError, topicIdsOf, validateTree } from './conditions/tree';
import { Topic } from '../topics';
import { Segment } from './segments.entity';
import {
  createMissingContacts,
  enterMatching,
  enterMembers,
  exitMembersByEmail,
  exitUnmatched,
  lockMembership,
  memberPage,
  segmentLockKey,
  storeMatchingCount,
  storeMemberCount,
} from './segments.queries';

export const toSegmentDto = (s: Segment) => ({
  id: s.id,
  name: s.name,
  description: s.description,
  type: s.type,
  condition: s.type === 'STATIC' ? null : s.condition,
  trackMembership: s.trackMembership,
  memberCount: s.memberCount,
  memberCountUpdatedAt: s.memberCountAt ? s.memberCountAt.toISOString() : null,
  projectId: s.projectId,
  createdAt: s.createdAt.toISOString(),
  updatedAt: s.updatedAt.toISOString(),
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
 * A condition must be valid, every topic it names must be the project's, and every segment it
 * references must exist in the project without leading back to `selfId` (a segment cannot be
 * defined through itself, however indirectly).
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
  const topicIds = [...topicIdsOf(condition as ConditionTree)];
  if (topicIds.length) {
    const known = new Set((await em.find(Topic, { projectId, id: { $in: topicIds } }, { fields: ['id'] })).map((t) => t.id));
    const unknown = topicIds.find((id) => !known.has(id));
    if (unknown) throw simpleBadRequest(`Invalid condition: topic ${unknown} does not exist`);
  }
  return condition as ConditionTree;
}

export async function getSegment(em: EntityManager, projectId: string, id: string): Promise<Segment> {
  const segment = await em.findOne(Segment, { projectId, id });
  if (!segment) throw notFound('Segment');
  return segment;
}

export async function listSegments(em: EntityManager, projectId: string): Promise<Segment[]> {
  return em.find(Segment, { projectId }, { orderBy: { createdAt: 'ASC', id: 'ASC' } });
}

export interface SegmentInput {
  name: string;
  description?: string | null;
  type: 'DYNAMIC' | 'STATIC';
  condition?: ConditionTree | null;
  trackMembership: boolean;
}

/** Creates a segment and starts `segment:<id>`, which keeps its count fresh, in one transaction. */
export async function createRefreshedSegment(em: EntityManager, temporal: WorkflowStarter, projectId: string, input: SegmentInput): Promise<Segment> {
  return transaction(em, async (tx) => {
    const segment = await createSegment(tx, projectId, input);
    // Started before the commit: if it fails nothing is written. Its first activity takes the segment's
    // lock, held here until the commit, so it sees the segment (or, after a rollback, none and ends).
    await holdUntilCommit(tx, segmentLockKey(segment.id));
    await temporal.startSegmentRefresh({ id: segment.id, projectId });
    return segment;
  });
}

const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What a request's membership changes recorded: for the caller to publish once they are committed. */
export interface SegmentChange {
  segment: Segment;
  events: EventRecord[];
}

/**
 * `POST /segments`: the condition checked, the segment created with its refresh workflow, counted, and
 * a tracked dynamic segment's first members entered (their entry events returned).
 */
export async function defineSegment(
  em: EntityManager,
  temporal: WorkflowStarter,
  projectId: string,
  fields: Omit<SegmentInput, 'condition'> & { condition?: unknown },
): Promise<SegmentChange> {
  if (fields.type === 'DYNAMIC' && !isObject(fields.condition)) {
    throw simpleBadRequest('condition is required for a DYNAMIC segment and must be an object');
  }
  const condition = fields.type === 'DYNAMIC' ? await checkCondition(em, projectId, fields.condition) : null;
  const segment = await createRefreshedSegment(em, temporal, projectId, { ...fields, condition });
  const counted = (await refreshCount(em, segment.id)) ?? segment;
  const computed = counted.trackMembership && counted.type === 'DYNAMIC' ? await computeMembership(em, segment.id) : undefined;
  return { segment: await getSegment(em, projectId, segment.id), events: computed?.events ?? [] };
}

/**
 * `PATCH /segments/:id`: a changed definition takes effect at once: the count, and for a tracked
 * segment the membership (its entry and exit events returned).
 */
export async function redefineSegment(
  em: EntityManager,
  projectId: string,
  id: string,
  fields: { name?: string; description?: string | null; condition?: unknown; trackMembership?: boolean },
): Promise<SegmentChange> {
  const segment = await getSegment(em, projectId, id);
  let condition: ConditionTree | undefined;
  if (fields.condition !== undefined) {
    if (segment.type === 'STATIC') throw simpleBadRequest('A STATIC segment has no condition; its members are managed with /members');
    if (!isObject(fields.condition)) throw simpleBadRequest('condition must be an object');
    condition = await checkCondition(em, projectId, fields.condition, id);
  }
  const { name, description, trackMembership } = fields;
  if (name !== undefined || description !== undefined || condition !== undefined || trackMembership !== undefined) {
    if (name !== undefined) segment.name = name;
    if (description !== undefined) segment.description = description;
    if (condition !== undefined) segment.condition = condition;
    if (trackMembership !== undefined) segment.trackMembership = trackMembership;
    // A PATCH with fields moves updatedAt even when their values are the same.
    segment.updatedAt = new Date();
    await em.flush();
  }
  const computed = await computeMembership(em, id);
  const refreshed = await refreshCount(em, id);
  return { segment: refreshed ?? (await getSegment(em, projectId, id)), events: computed?.events ?? [] };
}

/** `POST /segments/:id/compute`: membership recomputed now, with how many entered and exited. */
export async function recomputeSegment(
  em: EntityManager,
  projectId: string,
  id: string,
): Promise<SegmentChange & { computed: { tracked: boolean; entered: number; exited: number } }> {
  const segment = await getSegment(em, projectId, id);
  const computed = await computeMembership(em, segment.id);
  const refreshed = segment.trackMembership && segment.type === 'DYNAMIC' ? await getSegment(em, projectId, segment.id) : await refreshCount(em, segment.id);
  return {
    segment: refreshed ?? segment,
    events: computed?.events ?? [],
    computed: { tracked: segment.trackMembership, entered: computed?.entered ?? 0, exited: computed?.exited ?? 0 },
  };
}

export async function createSegment(em: EntityManager, projectId: string, input: SegmentInput): Promise<Segment> {
  const segment = em.create(Segment, {
    id: newId(),
    projectId,
    name: input.name,
    description: input.description ?? null,
    type: input.type,
    condition: input.type === 'DYNAMIC' ? (input.condition ?? null) : null,
    trackMembership: input.trackMembership,
  });
  await em.persist(segment).flush();
  return segment;
}

/** Who would miss the segment: campaigns not yet finished that target it, and segments defined through it. */
export async function segmentUsage(em: EntityManager, projectId: string, id: string) {
  // By entity name: the campaigns module imports this one, so importing its class would be a cycle.
  const campaigns = await em.find<Campaign>(
    'Campaign',
    { projectId, segmentId: id, status: { $in: ['DRAFT', 'SCHEDULED', 'SENDING', 'TESTING'] } },
    { orderBy: { name: 'ASC' } },
  );
  const segments = (await listSegments(em, projectId))
    .filter((s) => s.id !== id && s.type === 'DYNAMIC' && s.condition && safeRefs(s.condition).has(id))
    .map((s) => ({ id: s.id, name: s.name }));
  return { campaigns: campaigns.map((c) => ({ id: c.id, name: c.name, status: c.status })), segments };
}

function safeRefs(tree: ConditionTree): Set<string> {
  try {
    return validateTree(tree);
  } catch {
    return new Set();
  }
}

export async function deleteSegment(em: EntityManager, projectId: string, id: string): Promise<void> {
  const segment = await getSegment(em, projectId, id);
  const usage = await segmentUsage(em, projectId, id);
  if (usage.campaigns.length || usage.segments.length) {
    throw conflict('The segment is used by an active campaign or by another segment', 'SEGMENT_IN_USE', { details: usage });
  }
  await em.remove(segment).flush();
}

/** A page of the project's segment's members: live for a DYNAMIC segment. */
export async function segmentContacts(em: EntityManager, projectId: string, id: string, page: number, pageSize: number) {
  const segment = await getSegment(em, projectId, id);
  return memberPage(em, segment, await loadSegmentRefs(em, segment.projectId), page, pageSize);
}

/**
 * Counts members now and caches the count on the segment. No membership writes, no events.
 * The segment's row is locked before counting: every membership writer updates that row last in its
 * transaction, so the count is taken either before such a writer (which then applies its own
 * change) or after its commit. Counting first and then waiting for the row would write back a
 * count that misses the writer's members.
 */
export async function refreshCount(em: EntityManager, segmentId: string): Promise<Segment | undefined> {
  return transaction(em, async (tx) => {
    const segment = await tx.findOne(Segment, { id: segmentId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    if (!segment) return undefined;
    const segments = await loadSegmentRefs(tx, segment.projectId);
    return tx.map(Segment, await storeMatchingCount(tx, segment, segments));
  });
}

/** `POST /segments/:id/refresh`: the project's segment recounted (`refreshCount`), or as it was if it went meanwhile. */
export async function refreshSegment(em: EntityManager, projectId: string, id: string): Promise<Segment> {
  const segment = await getSegment(em, projectId, id);
  return (await refreshCount(em, segment.id)) ?? segment;
}

export function membershipEvents(segment: Pick<Segment, 'id' | 'name' | 'projectId'>, contactIds: string[], kind: 'entry' | 'exit'): NewEvent[] {
  const name = `segment.${segmentSlug(segment.name)}.${kind}`;
  return contactIds.map((contactId) => ({ projectId: segment.projectId, contactId, name, data: { segmentId: segment.id, segmentName: segment.name } }));
}

/**
 * Recomputes the membership of a tracked dynamic segment against its condition now: who matches and
 * is not a member enters, who is a member and no longer matches exits, each with its event, in one
 * transaction under the segment's exclusive lock. A contact already in the right state changes
 * nothing, so every real change is emitted exactly once however often this runs.
 */
export async function computeMembership(em: EntityManager, segmentId: string): Promise<{ entered: number; exited: number; events: EventRecord[] } | undefined> {
  return transaction(em, async (tx) => {
    await lockMembership(tx, segmentId, 'exclusive');
    // Read under the lock, past the identity map: the definition as it is now.
    const segment = await tx.findOne(Segment, { id: segmentId }, { refresh: true });
    if (!segment) return undefined;
    if (segment.type !== 'DYNAMIC' || !segment.trackMembership || !segment.condition) return { entered: 0, exited: 0, events: [] };
    const segments = await loadSegmentRefs(tx, segment.projectId);
    const entered = await enterMatching(tx, segment, segments);
    const exited = await exitUnmatched(tx, segment, segments);
    const events = await insertEvents(tx, [...membershipEvents(segment, entered, 'entry'), ...membershipEvents(segment, exited, 'exit')]);
    tx.map(Segment, await storeMemberCount(tx, segment.id));
    return { entered: entered.length, exited: exited.length, events };
  });
}

/**
 * Adds contacts to the project's static segment by email; with `createMissing`, unknown emails become
 * contacts (subscribed unless `subscribed` says otherwise). Members who had left re-enter. A tracked
 * segment records an entry event for each real entry.
 */
export async function addStaticMembers(
  em: EntityManager,
  projectId: string,
  id: string,
  emails: string[],
  opts: { createMissing: boolean; subscribed?: boolean },
) {
  const segment = await getSegment(em, projectId, id);
  if (segment.type !== 'STATIC') throw simpleBadRequest('Members can only be added to a STATIC segment');
  return transaction(em, async (tx) => {
    await lockMembership(tx, segment.id, 'exclusive');
    const unique = [...new Set(emails)];
    const created = opts.createMissing ? await createMissingContacts(tx, segment.projectId, unique, opts.subscribed ?? true) : [];
    const contacts = await tx.find(ContactSchema, { projectId: segment.projectId, email: { $in: unique } });
    const entered = await enterMembers(
      tx,
      segment.id,
      segment.projectId,
      contacts.map((c) => c.id),
    );
    const events = segment.trackMembership ? await insertEvents(tx, membershipEvents(segment, entered, 'entry')) : [];
    tx.map(Segment, await storeMemberCount(tx, segment.id));
    const found = new Set(contacts.map((c) => c.email));
    return {
      result: {
        added: entered.length,
        alreadyMembers: contacts.length - entered.length,
        created: created.length,
        notFound: unique.filter((e) => !found.has(e)),
      },
      events,
      contactIds: [...created.map((c) => c.id), ...entered],
    };
  });
}

/** Removes contacts from the project's static segment by email; a tracked segment records an exit event for each. */
export async function removeStaticMembers(em: EntityManager, projectId: string, id: string, emails: string[]) {
  const segment = await getSegment(em, projectId, id);
  if (segment.type !== 'STATIC') throw simpleBadRequest('Members can only be removed from a STATIC segment');
  return transaction(em, async (tx) => {
    await lockMembership(tx, segment.id, 'exclusive');
    const unique = [...new Set(emails)];
    const exited = await exitMembersByEmail(tx, segment, unique);
    const events = segment.trackMembership
      ? await insertEvents(
          tx,
          membershipEvents(
            segment,
            exited.map((r) => r.contact_id),
            'exit',
          ),
        )
      : [];
    tx.map(Segment, await storeMemberCount(tx, segment.id));
    const removed = new Set(exited.map((r) => r.email));
    return { result: { removed: exited.length, notMembers: unique.filter((e) => !removed.has(e)) }, events, contactIds: exited.map((r) => r.contact_id) };
  });
}
