import type { EntityManager } from '@mikro-orm/postgresql';
import { contactFactRows, lastEventTimes, segmentRefs, staticMemberships, subscribedTopicRows } from '../segments.queries';
import type { SegmentRef } from './compile';
import type { ContactFacts } from './evaluate';

/** Every segment of a project as the compilers need them, for following `segment.<id>` references. */
export async function loadSegmentRefs(em: EntityManager, projectId: string): Promise<Map<string, SegmentRef>> {
  const rows = await segmentRefs(em, projectId);
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * What the evaluator needs about some contacts: their fields, the last time of each named event, static
 * memberships, and whether they receive each of `topicIds`.
 */
export async function loadContactFacts(
  em: EntityManager,
  projectId: string,
  contactIds: string[],
  eventNames: Iterable<string>,
  topicIds: Iterable<string> = [],
): Promise<Map<string, ContactFacts>> {
  const contacts = await contactFactRows(em, projectId, contactIds);
  const names = [...eventNames];
  const events = names.length ? await lastEventTimes(em, projectId, contactIds, names) : [];
  const statics = await staticMemberships(em, contactIds);
  const topics = [...topicIds];
  const subscribed = topics.length ? await subscribedTopicRows(em, projectId, contactIds, topics) : [];
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
      subscribedTopics: new Set(),
    });
  }
  for (const e of events) (out.get(e.contact_id)?.lastEventAt as Map<string, number>)?.set(e.name, new Date(e.last).getTime());
  for (const m of statics) (out.get(m.contact_id)?.staticSegments as Set<string>)?.add(m.segment_id);
  for (const t of subscribed) (out.get(t.contact_id)?.subscribedTopics as Set<string>)?.add(t.topic_id);
  return out;
}
