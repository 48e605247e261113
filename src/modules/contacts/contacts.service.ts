import { LockMode, raw } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { containsPattern } from '../../db/like-pattern';
import { transaction } from '../../db/orm';
import { conflict, notFound, simpleBadRequest } from '../../errors';
import { type EventRecord, insertEvents, type NewEvent, SYSTEM_EVENTS } from '../events';
import { setContactTopics } from '../topics';
import { Contact } from './contacts.entity';
import {
  type ContactListRow,
  contactPage,
  type ContactState,
  contactTotal,
  countContactsWhere,
  deleteContactsIn,
  insertContactIfNew,
  setContactSubscribed,
  lockContactByEmail,
  saveContactChange,
} from './contacts.queries';
import { applyData, type ResolvedData } from './data-map';

export interface ContactDto {
  id: string;
  email: string;
  subscribed: boolean;
  snoozedUntil: string | null;
  data: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

export const toContactDto = (c: ContactListRow): ContactDto => ({
  id: c.id,
  email: c.email,
  subscribed: c.subscribed,
  snoozedUntil: c.snoozedUntil ? c.snoozedUntil.toISOString() : null,
  data: c.data ?? {},
  createdAt: c.createdAt.toISOString(),
  updatedAt: c.updatedAt.toISOString(),
});

export interface UpsertInput {
  email: string;
  /** Explicit subscription state; undefined keeps an existing contact's state. */
  subscribed?: boolean;
  /** State of a contact created by this call when `subscribed` is not given. */
  defaultSubscribed: boolean;
  data: Pick<ResolvedData, 'set' | 'unset'>;
}

export interface UpsertResult {
  contact: Contact;
  isNew: boolean;
  /** Data or subscription actually changed on an existing contact. */
  isUpdate: boolean;
  /** contact.subscribed / contact.unsubscribed events written with the change. */
  events: EventRecord[];
}

function subscriptionEvent(projectId: string, contactId: string, subscribed: boolean, data: Record<string, unknown>): NewEvent {
  return {
    projectId,
    contactId,
    name: subscribed ? SYSTEM_EVENTS.contactSubscribed : SYSTEM_EVENTS.contactUnsubscribed,
    data,
  };
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** `POST /contacts`: creates or updates the contact with this email in a transaction of its own (a new contact is subscribed). */
export function saveContact(em: EntityManager, projectId: string, input: Omit<UpsertInput, 'defaultSubscribed'>): Promise<UpsertResult> {
  return transaction(em, (tx) => upsertContact(tx, projectId, { ...input, defaultSubscribed: true }));
}

/**
 * Creates or updates the contact with this email. The insert is tried first; an existing row is then
 * locked so a change of `subscribed` is seen, and its event written, exactly once.
 * Must run inside a transaction.
 */
export async function upsertContact(em: EntityManager, projectId: string, input: UpsertInput): Promise<UpsertResult> {
  const created = await insertContactIfNew(em, {
    id: newId(),
    projectId,
    email: input.email,
    subscribed: input.subscribed ?? input.defaultSubscribed,
    data: applyData({}, input.data),
  });
  if (created) return { contact: created, isNew: true, isUpdate: false, events: [] };

  const current = await lockContactByEmail(em, projectId, input.email);
  return updateLocked(em, current, { subscribed: input.subscribed, data: input.data }, savedAlone(em, current));
}

interface Change {
  email?: string;
  subscribed?: boolean;
  data?: Pick<ResolvedData, 'set' | 'unset'>;
  /** A snooze: subscribed false until this instant. */
  snoozedUntil?: Date;
  /** Extra fields for the subscription event (e.g. a snooze's reason). */
  eventData?: Record<string, unknown>;
}

/** What a change makes of the contact; undefined when it changes nothing. */
function nextState(current: Contact, change: Change): ContactState | undefined {
  const data = change.data ? applyData(current.data ?? {}, change.data) : current.data;
  let subscribed = current.subscribed;
  let snoozedUntil = current.snoozedUntil;
  if (change.snoozedUntil) {
    subscribed = false;
    snoozedUntil = change.snoozedUntil;
  } else if (change.subscribed !== undefined) {
    // Every write of `subscribed` ends a snooze.
    subscribed = change.subscribed;
    snoozedUntil = null;
  }
  const email = change.email ?? current.email;
  const changed =
    email !== current.email ||
    subscribed !== current.subscribed ||
    snoozedUntil?.getTime() !== current.snoozedUntil?.getTime() ||
    !sameJson(data, current.data);
  return changed ? { email, subscribed, snoozedUntil, data } : undefined;
}

/** Writes a contact's new state through the unit of work. */
const flushed = (em: EntityManager, contact: Contact) => async (next: ContactState) => {
  Object.assign(contact, next);
  await em.flush();
  return contact;
};

/**
 * Applies a change to a contact locked FOR UPDATE by the caller's transaction; `write` stores the new
 * state and answers the contact as stored.
 */
async function updateLocked(em: EntityManager, current: Contact, change: Change, write: (next: ContactState) => Promise<Contact>): Promise<UpsertResult> {
  const next = nextState(current, change);
  if (!next) return { contact: current, isNew: false, isUpdate: false, events: [] };
  const wasSubscribed = current.subscribed;
  const contact = await write(next);
  const events =
    next.subscribed !== wasSubscribed
      ? await insertEvents(em, [subscriptionEvent(contact.projectId, contact.id, next.subscribed, change.eventData ?? {})])
      : [];
  return { contact, isNew: false, isUpdate: true, events };
}

export async function getContact(em: EntityManager, projectId: string, id: string): Promise<Contact> {
  const contact = await em.findOne(Contact, { projectId, id });
  if (!contact) throw notFound('Contact');
  return contact;
}

/** A contact read to be changed: locked FOR UPDATE in the caller's transaction, and read afresh. */
const forUpdate = { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true } as const;

/**
 * A locked contact's change written with one UPDATE, never a flush: changes made many to a transaction (a batch of
 * bounce reports, a bulk job's chunk, upserts) would otherwise each walk every entity the transaction loaded before.
 */
const savedAlone = (em: EntityManager, contact: Contact) => (next: ContactState) => saveContactChange(em, contact.id, next);

export interface ContactPatch {
  email?: string;
  subscribed?: boolean;
  data?: Pick<ResolvedData, 'set' | 'unset'>;
  snoozedUntil?: Date;
  /** Ends a snooze now (snoozedUntil: null). */
  endSnooze?: boolean;
  /** Topic id → join (true) or leave (false). */
  topics?: Record<string, boolean>;
}

/**
 * `beforeCommit` runs with the updated row still locked and the transaction open: work outside the
 * database that must not be lost (arranging a snooze's end) happens there, so a failure leaves
 * nothing written, and a commit that fails after it leaves only an effect that finds nothing to do.
 */
export async function updateContact(
  em: EntityManager,
  projectId: string,
  id: string,
  patch: ContactPatch,
  beforeCommit?: (contact: Contact) => Promise<void>,
): Promise<UpsertResult & { pending: string[] }> {
  return transaction(em, async (tx) => {
    const current = await tx.findOne(Contact, { projectId, id }, forUpdate);
    if (!current) throw notFound('Contact');
    if (patch.email && patch.email !== current.email && (await tx.count(Contact, { projectId, email: patch.email })) > 0) {
      throw conflict(`A contact with email ${patch.email} already exists`, 'CONTACT_EXISTS');
    }
    const snoozeEnded = patch.endSnooze && current.snoozedUntil !== null;
    const change: Change = {
      email: patch.email,
      data: patch.data,
      subscribed: snoozeEnded ? true : patch.subscribed,
      snoozedUntil: patch.snoozedUntil,
      eventData: patch.snoozedUntil ? { reason: 'snooze', snoozedUntil: patch.snoozedUntil.toISOString() } : snoozeEnded ? { reason: 'snooze_cancelled' } : {},
    };
    const result = await updateLocked(tx, current, change, flushed(tx, current));
    const topics = patch.topics ? await setContactTopics(tx, projectId, id, patch.topics, { source: 'api' }) : { events: [], pending: [] };
    await beforeCommit?.(result.contact);
    return { ...result, events: [...result.events, ...topics.events], pending: topics.pending };
  });
}

/**
 * Ends a snooze that is due: resubscribes the contact only if it still carries exactly this snooze,
 * so running it twice, or after the contact changed, does nothing.
 */
export async function endSnooze(em: EntityManager, contactId: string, snoozedUntil: Date): Promise<{ projectId: string; events: EventRecord[] } | undefined> {
  return transaction(em, async (tx) => {
    const current = await tx.findOne(Contact, { id: contactId, snoozedUntil: { $eq: snoozedUntil, $lte: raw('now()') } }, forUpdate);
    if (!current) return undefined;
    const result = await updateLocked(tx, current, { subscribed: true, eventData: { reason: 'snooze_expired' } }, flushed(tx, current));
    return { projectId: current.projectId, events: result.events };
  });
}

/**
 * Sets `subscribed` (ending any snooze) from outside the API: unsubscribe links, bounces, complaints.
 * Runs in the caller's transaction; answers the subscription event when it was a real change.
 */
export async function updateContactSubscription(
  em: EntityManager,
  contactId: string,
  subscribed: boolean,
  eventData: Record<string, unknown>,
): Promise<EventRecord[]> {
  const set = await setContactSubscribed(em, contactId, subscribed);
  if (!set || set.wasSubscribed === subscribed) return [];
  return insertEvents(em, [subscriptionEvent(set.projectId, contactId, subscribed, eventData)]);
}

/**
 * Sets `subscribed` (ending any snooze) on those of `ids` that belong to the project, in the caller's
 * transaction, locking them in id order. A real change records its subscription event.
 */
export async function setSubscriptionOf(
  em: EntityManager,
  projectId: string,
  ids: string[],
  subscribed: boolean,
  eventData: Record<string, unknown>,
): Promise<{ changed: string[]; unchanged: string[]; missing: string[]; events: EventRecord[] }> {
  const rows = await em.find(Contact, { projectId, id: { $in: ids } }, { ...forUpdate, disableIdentityMap: true, orderBy: { id: 'asc' } });
  const out = { changed: [] as string[], unchanged: [] as string[], missing: [] as string[], events: [] as EventRecord[] };
  for (const row of rows) {
    const result = await updateLocked(em, row, { subscribed, eventData }, savedAlone(em, row));
    (result.isUpdate ? out.changed : out.unchanged).push(row.id);
    out.events.push(...result.events);
  }
  const found = new Set(rows.map((r) => r.id));
  out.missing = ids.filter((id) => !found.has(id));
  return out;
}

/** Deletes those of `ids` that belong to the project; everything that hangs off a contact goes with it. */
export async function deleteContactsOf(em: EntityManager, projectId: string, ids: string[]): Promise<{ deleted: string[]; missing: string[] }> {
  const deleted = new Set(await deleteContactsIn(em, projectId, ids));
  return { deleted: [...deleted], missing: ids.filter((id) => !deleted.has(id)) };
}

export async function deleteContact(em: EntityManager, projectId: string, id: string): Promise<void> {
  if ((await em.nativeDelete(Contact, { projectId, id })) === 0) throw notFound('Contact');
}

export async function lookupContacts(em: EntityManager, projectId: string, emails: string[]) {
  const unique = [...new Set(emails)];
  const contacts = await em.find(Contact, { projectId, email: { $in: unique } }, { fields: ['id', 'email'], orderBy: { email: 'asc' } });
  const found = contacts.map((c) => ({ id: c.id, email: c.email }));
  const seen = new Set(found.map((r) => r.email));
  return { found, missing: unique.filter((e) => !seen.has(e)) };
}

export interface ListQuery {
  limit: number;
  cursor?: string;
  search?: string;
  subscribed?: boolean;
  status?: 'subscribed' | 'unsubscribed' | 'snoozed';
  sort: 'createdAt' | 'email';
  dir: 'asc' | 'desc';
}

/** Cursor pages ordered by the sort column then id; `total` only on the first page. */
export async function listContacts(em: EntityManager, projectId: string, q: ListQuery) {
  const where: string[] = ['project_id = ?'];
  const params: unknown[] = [projectId];
  if (q.search) {
    where.push(`email ILIKE ?`);
    params.push(containsPattern(q.search.trim().toLowerCase()));
  }
  if (q.subscribed !== undefined) {
    where.push('subscribed = ?');
    params.push(q.subscribed);
  }
  if (q.status === 'subscribed') where.push('subscribed');
  if (q.status === 'unsubscribed') where.push('NOT subscribed AND snoozed_until IS NULL');
  if (q.status === 'snoozed') where.push('snoozed_until IS NOT NULL');
  const rows = await contactPage(em, projectId, { where, params, sort: q.sort, dir: q.dir, cursor: q.cursor, limit: q.limit + 1 });
  if (!rows) throw simpleBadRequest('Invalid cursor');
  const hasMore = rows.length > q.limit;
  const data = rows.slice(0, q.limit).map(toContactDto);
  let total = 0;
  if (!q.cursor) {
    // Unfiltered, the maintained per-project count answers without counting.
    total = where.length === 1 ? await contactTotal(em, projectId) : await countContactsWhere(em, where, params);
  }
  return { data, cursor: data.length ? data[data.length - 1].id : '', hasMore, total };
}
