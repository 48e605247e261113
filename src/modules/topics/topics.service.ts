import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { isUniqueViolation } from '../../db/orm';
import { AppError, conflict, notFound } from '../../http/errors';
import { projectSettings } from '../accounts';
import { type EventRecord, insertEvents, type NewEvent, SYSTEM_EVENTS } from '../events';
import { ContactTopic, Topic, type TopicState } from './topics.entity';
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

/** Deleting a topic deletes every contact's choice for it. */
export async function deleteTopic(em: EntityManager, projectId: string, id: string): Promise<void> {
  const topic = await getTopic(em, projectId, id);
  await em.remove(topic).flush();
}

export interface TopicListQuery {
  page: number;
  pageSize: number;
  search?: string;
  sort: 'name' | 'createdAt' | 'updatedAt';
  dir: 'ASC' | 'DESC';
}

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listTopics(em: EntityManager, projectId: string, q: TopicListQuery) {
  const pattern = q.search ? likePattern(q.search) : undefined;
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

/** Whether joining the topic (null: any topic without its own setting) waits for an emailed confirmation. */
export async function doubleOptInApplies(em: EntityManager, projectId: string, topicId: string | null): Promise<boolean> {
  const topic = topicId ? await getTopic(em, projectId, topicId) : null;
  return topic?.doubleOptIn ?? (await projectSettings(em, projectId)).doubleOptIn;
}

/** The validation error for topic ids that are not the project's, one entry per id. */
export function unknownTopics(ids: string[], field = 'topics'): AppError {
  return new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: ids.map((id) => ({ field: `${field}.${id}`, message: `Topic ${id} does not exist in this project`, code: 'unknown_topic' })),
  });
}

export interface TopicChangeOptions {
  /** Where the change came from (api, import, bulk, one_click, ...); recorded in each event's data. */
  source: string;
  /** The join is already confirmed (the confirmation link itself): never pending. */
  confirmed?: boolean;
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
): Promise<{ events: EventRecord[]; pending: string[] }> {
  const ids = Object.keys(changes);
  if (ids.length === 0) return { events: [], pending: [] };
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
  for (const topic of topics) {
    const row = rows.get(topic.id);
    const current = row?.state ?? defaultState(topic);
    let next: TopicState;
    if (!changes[topic.id]) next = 'unsubscribed';
    else if (current === 'subscribed' || how.confirmed) next = 'subscribed';
    else next = (topic.doubleOptIn ?? projectDoubleOptIn) ? 'pending' : 'subscribed';
    if (next === 'pending') pending.push(topic.id);
    if (next === current) continue;
    if (row) Object.assign(row, { state: next, updatedAt: new Date() });
    else tx.create(ContactTopic, { contactId, topicId: topic.id, projectId, state: next, updatedAt: new Date() });
    if (next !== 'pending') {
      const name = next === 'subscribed' ? SYSTEM_EVENTS.contactSubscribed : SYSTEM_EVENTS.contactUnsubscribed;
      events.push({ projectId, contactId, name, data: { topicId: topic.id, source: how.source, ...how.eventData } });
    }
  }
  await tx.flush();
  return { events: await insertEvents(tx, events), pending };
}
