import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { containsPattern } from '../../db/like-pattern';
import { isUniqueViolation } from '../../db/orm';
import { AppError, conflict, notFound } from '../../errors';
import { projectSettings } from '../accounts';
import { type EventRecord, insertEvents, type NewEvent, SYSTEM_EVENTS } from '../events';
import { ContactTopic, Topic, type TopicState } from './topics.entity';
import { joinOptOutTopics, topicUsers } from './topics.queries';
import type { CreateTopic, UpdateTopic } from './topics.schemas';

export const toTopicDto = (t: Topic) => ({
  id: t.id,
  name: t.name,
  description: t.description,
  defaultSubscription: t.defaultSubscription,
  public: t.public,
  doubleOptIn: t.doubleOptIn,
  projectId: t.projectId,
  createdAt: t.createdAt.toISOString(),
  updatedAt: t.updatedAt.toISOString(),
});

const nameTaken = (name: string) => conflict(`A topic named ${name} already exists`, 'TOPIC_EXISTS');

export async function createTopic(em: EntityManager, projectId: string, input: CreateTopic): Promise<Topic> {
  if ((await em.count(Topic, { projectId, name: input.name })) > 0) throw nameTaken(input.name);
  const topic = em.create(Topic, {
    id: newId(),
    projectId,
    name: input.name,
    description: input.description ?? null,
    defaultSubscription: input.defaultSubscription ?? 'opt_in',
    public: input.public ?? true,
    doubleOptIn: input.doubleOptIn ?? null,
  });
  try {
    await em.persist(topic).flush();
  } catch (err) {
    // Another request took the name between the check and the insert.
    if (isUniqueViolation(err)) throw nameTaken(input.name);
    throw err;
  }
  return topic;
}

export async function getTopic(em: EntityManager, projectId: string, id: string): Promise<Topic> {
  const topic = await em.findOne(Topic, { projectId, id });
  if (!topic) throw notFound('Topic');
  return topic;
}

export async function updateTopic(em: EntityManager, projectId: string, id: string, patch: UpdateTopic): Promise<Topic> {
  const topic = await getTopic(em, projectId, id);
  const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
  if (Object.keys(changes).length === 0) return topic;
  if (patch.name !== undefined && patch.name !== topic.name && (await em.count(Topic, { projectId, name: patch.name })) > 0) throw nameTaken(patch.name);
  em.assign(topic, { ...changes, updatedAt: new Date() });
  try {
    await em.flush();
  } catch (err) {
    if (isUniqueViolation(err)) throw nameTaken(patch.name!);
    throw err;
  }
  return topic;
}

/**
 * Deleting a topic deletes every contact's choice for it; sent campaigns forget it. A topic an unsent
 * campaign or a workflow step sends for is kept (409): deleting it would change who they reach.
 */
export async function deleteTopic(em: EntityManager, projectId: string, id: string): Promise<void> {
  const topic = await getTopic(em, projectId, id);
  const users = await topicUsers(em, projectId, id);
  if (users.campaigns.length || users.workflowSteps.length) {
    throw conflict('The topic is used by unsent campaigns or workflow steps', 'TOPIC_IN_USE', { details: users });
  }
  await em.remove(topic).flush();
}

export interface TopicListQuery {
  page: number;
  pageSize: number;
  search?: string;
  sort: 'name' | 'createdAt' | 'updatedAt';
  dir: 'ASC' | 'DESC';
}

export async function listTopics(em: EntityManager, projectId: string, q: TopicListQuery) {
  const pattern = q.search ? containsPattern(q.search) : undefined;
  const [rows, total] = await em.findAndCount(
    Topic,
    { projectId, ...(pattern ? { $or: [{ name: { $ilike: pattern } }, { description: { $ilike: pattern } }] } : {}) },
    { orderBy: [{ [q.sort]: q.dir }, { id: q.dir }], limit: q.pageSize, offset: (q.page - 1) * q.pageSize },
  );
  return { data: rows.map(toTopicDto), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
}

/** A topic's state for a contact that made no choice: opt_in topics are received, opt_out ones are not. */
export const defaultState = (t: Pick<Topic, 'defaultSubscription'>): TopicState => (t.defaultSubscription === 'opt_in' ? 'subscribed' : 'unsubscribed');

/** The contact's state in every topic of the project, defaults applied. */
export async function topicStatesOf(em: EntityManager, projectId: string, contactId: string): Promise<Record<string, TopicState>> {
  const [topics, rows] = await Promise.all([
    em.find(Topic, { projectId }, { fields: ['id', 'defaultSubscription'], orderBy: { createdAt: 'asc', id: 'asc' } }),
    em.find(ContactTopic, { projectId, contactId }, { fields: ['topicId', 'state'] }),
  ]);
  const chosen = new Map(rows.map((r) => [r.topicId, r.state]));
  return Object.fromEntries(topics.map((t) => [t.id, chosen.get(t.id) ?? defaultState(t)]));
}

/** The contact's state in one topic, default applied; undefined when the project has no such topic. */
export async function topicStateOf(em: EntityManager, projectId: string, contactId: string, topicId: string): Promise<TopicState | undefined> {
  const topic = await em.findOne(Topic, { projectId, id: topicId }, { fields: ['defaultSubscription'] });
  if (!topic) return undefined;
  const row = await em.findOne(ContactTopic, { contactId, topicId }, { fields: ['state'] });
  return row?.state ?? defaultState(topic);
}

/** Whether joining the topic (null: any topic without its own setting) waits for an emailed confirmation. */
export async function doubleOptInApplies(em: EntityManager, projectId: string, topicId: string | null): Promise<boolean> {
  const topic = topicId ? await getTopic(em, projectId, topicId) : null;
  return topic?.doubleOptIn ?? (await projectSettings(em, projectId)).doubleOptIn;
}

/** The validation error for topic ids that are not the project's, one entry per id. */
export function unknownTopics(ids: string[], fieldOf: (id: string) => string = (id) => `topics.${id}`): AppError {
  return new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: ids.map((id) => ({ field: fieldOf(id), message: `Topic ${id} does not exist in this project`, code: 'unknown_topic' })),
  });
}

export interface TopicChangeOptions {
  /** Where the change came from (api, import, bulk, one_click, ...); recorded in each event's data. */
  source: string;
  /** The join is already confirmed (the confirmation link itself): never pending. */
  confirmed?: boolean;
  /** Every join waits for confirmation, whatever double opt-in says (the form, for a contact who opted out). */
  confirmFirst?: boolean;
  /** More fields for each event's data (a consent record, an email id). */
  eventData?: Record<string, unknown>;
}

/**
 * Sets a contact's topics, in the caller's transaction: true joins (pending where double opt-in
 * applies, unless already subscribed), false leaves. Each real change to subscribed or unsubscribed
 * records contact.subscribed / contact.unsubscribed with the topic's id; answers those events and the
 * topics left pending, for which the caller sends the confirmation. Unknown topic ids are a 422.
 */
export async function setContactTopics(
  tx: EntityManager,
  projectId: string,
  contactId: string,
  changes: Record<string, boolean>,
  how: TopicChangeOptions,
): Promise<{ events: EventRecord[]; pending: string[]; changed: string[] }> {
  // Ids as PostgreSQL writes them, so an upper-case id in a request still matches.
  changes = Object.fromEntries(Object.entries(changes).map(([id, join]) => [id.toLowerCase(), join]));
  const ids = Object.keys(changes);
  if (ids.length === 0) return { events: [], pending: [], changed: [] };
  const topics = await tx.find(Topic, { projectId, id: { $in: ids } });
  const missing = ids.filter((id) => !topics.some((t) => t.id === id));
  if (missing.length) throw unknownTopics(missing);
  // The contact's row is the lock that orders concurrent changes of its topics.
  const contact = await tx.findOne<{ id: string; projectId: string }>('Contact', { projectId, id: contactId }, { lockMode: LockMode.PESSIMISTIC_WRITE });
  if (!contact) throw notFound('Contact');
  const rows = new Map((await tx.find(ContactTopic, { contactId, topicId: { $in: ids } })).map((r) => [r.topicId, r]));
  const projectDoubleOptIn = Object.values(changes).some(Boolean) && !how.confirmed ? (await projectSettings(tx, projectId)).doubleOptIn : false;

  const events: NewEvent[] = [];
  const pending: string[] = [];
  const changed: string[] = [];
  for (const topic of topics) {
    const row = rows.get(topic.id);
    const current = row?.state ?? defaultState(topic);
    let next: TopicState;
    if (!changes[topic.id]) next = 'unsubscribed';
    else if (current === 'subscribed' || how.confirmed) next = 'subscribed';
    else next = how.confirmFirst || (topic.doubleOptIn ?? projectDoubleOptIn) ? 'pending' : 'subscribed';
    if (next === 'pending') pending.push(topic.id);
    // A choice equal to the default is still stored: it is the contact's own, which an import keeps.
    if (!row) tx.create(ContactTopic, { contactId, topicId: topic.id, projectId, state: next, updatedAt: new Date() });
    if (next === current) continue;
    changed.push(topic.id);
    if (row) Object.assign(row, { state: next, updatedAt: new Date() });
    if (next !== 'pending') {
      const name = next === 'subscribed' ? SYSTEM_EVENTS.contactSubscribed : SYSTEM_EVENTS.contactUnsubscribed;
      events.push({ projectId, contactId, name, data: { topicId: topic.id, source: how.source, ...how.eventData } });
    }
  }
  await tx.flush();
  return { events: await insertEvents(tx, events), pending, changed };
}

/**
 * Joins many contacts to topics (a CSV import), in the caller's transaction. A contact that already
 * chose in a topic keeps its choice. With `askConfirmation`, joins wait for confirmation where double
 * opt-in applies; without it the caller vouches for consent. Records contact.subscribed for each join
 * and answers the pending ones, by contact, for the caller to send the confirmations.
 */
export async function joinTopics(
  tx: EntityManager,
  projectId: string,
  contactIds: string[],
  topicIds: string[],
  how: { source: string; askConfirmation: boolean; eventData?: Record<string, unknown> },
): Promise<{ events: EventRecord[]; pending: Map<string, string[]> }> {
  const pending = new Map<string, string[]>();
  if (contactIds.length === 0 || topicIds.length === 0) return { events: [], pending };
  const projectDoubleOptIn = how.askConfirmation && (await projectSettings(tx, projectId)).doubleOptIn;
  const rows = await joinOptOutTopics(tx, projectId, contactIds, topicIds, how.askConfirmation, projectDoubleOptIn);
  const events: NewEvent[] = [];
  for (const r of rows) {
    if (r.state === 'pending') pending.set(r.contact_id, [...(pending.get(r.contact_id) ?? []), r.topic_id]);
    else {
      const data = { topicId: r.topic_id, source: how.source, ...how.eventData };
      events.push({ projectId, contactId: r.contact_id, name: SYSTEM_EVENTS.contactSubscribed, data });
    }
  }
  return { events: await insertEvents(tx, events), pending };
}

/** Those of `ids` that are not topics of the project. */
export async function missingTopics(em: EntityManager, projectId: string, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const found = new Set((await em.find(Topic, { projectId, id: { $in: ids } }, { fields: ['id'] })).map((t) => t.id));
  return ids.filter((id) => !found.has(id.toLowerCase()));
}
