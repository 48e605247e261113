import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql, transaction } from '../../db/orm';
import { conflict, notFound, simpleBadRequest } from '../../http/errors';
import { SYSTEM_EVENTS } from '../events';
import { type EventRecord, insertEvents, type NewEvent } from '../events';
import { applyData, type ResolvedData } from './data-map';

export interface ContactRow {
  id: string;
  project_id: string;
  email: string;
  subscribed: boolean;
  snoozed_until: Date | null;
  data: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

export interface ContactDto {
  id: string;
  email: string;
  subscribed: boolean;
  snoozedUntil: string | null;
  data: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

const COLUMNS = 'id, project_id, email, subscribed, snoozed_until, data, created_at, updated_at';

export const toContactDto = (r: ContactRow): ContactDto => ({
  id: r.id,
  email: r.email,
  subscribed: r.subscribed,
  snoozedUntil: r.snoozed_until ? new Date(r.snoozed_until).toISOString() : null,
  data: r.data ?? {},
  createdAt: new Date(r.created_at).toISOString(),
  updatedAt: new Date(r.updated_at).toISOString(),
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
  contact: ContactRow;
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

/**
 * Creates or updates the contact with this email. The insert is tried first; an existing row is then
 * locked so a change of `subscribed` is seen, and its event written, exactly once.
 * Must run inside a transaction.
 */
export async function upsertContact(em: EntityManager, projectId: string, input: UpsertInput): Promise<UpsertResult> {
  const initial = applyData({}, input.data);
  const [created] = await sql<ContactRow>(
    em,
    `INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?::jsonb, now(), now())
     ON CONFLICT (project_id, email) DO NOTHING
     RETURNING ${COLUMNS}`,
    [newId(), projectId, input.email, input.subscribed ?? input.defaultSubscribed, JSON.stringify(initial)],
  );
  if (created) return { contact: created, isNew: true, isUpdate: false, events: [] };

  const [current] = await sql<ContactRow>(em, `SELECT ${COLUMNS} FROM contacts WHERE project_id = ? AND email = ? FOR UPDATE`, [projectId, input.email]);
  return updateLocked(em, current, { subscribed: input.subscribed, data: input.data });
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

/** Applies a change to a row locked FOR UPDATE by the caller's transaction. */
async function updateLocked(em: EntityManager, current: ContactRow, change: Change): Promise<UpsertResult> {
  const data = change.data ? applyData(current.data ?? {}, change.data) : current.data;
  let subscribed = current.subscribed;
  let snoozedUntil = current.snoozed_until;
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
    email !== current.email || subscribed !== current.subscribed || String(snoozedUntil) !== String(current.snoozed_until) || !sameJson(data, current.data);
  if (!changed) return { contact: current, isNew: false, isUpdate: false, events: [] };

  const [updated] = await sql<ContactRow>(
    em,
    `UPDATE contacts SET email = ?, subscribed = ?, snoozed_until = ?, data = ?::jsonb, updated_at = now()
     WHERE id = ? RETURNING ${COLUMNS}`,
    [email, subscribed, snoozedUntil, JSON.stringify(data), current.id],
  );
  const events =
    subscribed !== current.subscribed ? await insertEvents(em, [subscriptionEvent(current.project_id, current.id, subscribed, change.eventData ?? {})]) : [];
  return { contact: updated, isNew: false, isUpdate: true, events };
}

export interface ContactEventInput {
  projectId: string;
  email: string;
  data: Pick<ResolvedData, 'set' | 'unset'>;
  event: { name: string; data: Record<string, unknown> };
}

/**
 * Upserts each item's contact (subscribed when new, data merged) and records its event, all in one
 * statement. Each (project, email) may appear once: ON CONFLICT cannot change a row twice. Rows are
 * locked in (project, email) order, so concurrent calls cannot deadlock on each other. Answers in
 * the order of `items`. Subscription cannot change here, so no lock beyond the rows' own is needed.
 */
export async function upsertContactsAndInsertEvents(em: EntityManager, items: ContactEventInput[]): Promise<Array<{ contactId: string; event: EventRecord }>> {
  const input = items.map((i) => ({
    project_id: i.projectId,
    email: i.email,
    set_data: i.data.set,
    unset_keys: i.data.unset,
    new_contact_id: newId(),
    event_id: newId(),
    name: i.event.name,
    event_data: i.event.data,
  }));
  const rows = await sql<{ contact_id: string; id: string; name: string; data: Record<string, unknown>; created_at: Date }>(
    em,
    `WITH input AS (
       SELECT * FROM jsonb_to_recordset(?::jsonb) AS x(project_id uuid, email text, set_data jsonb, unset_keys text[],
         new_contact_id uuid, event_id uuid, name text, event_data jsonb)
       ORDER BY project_id, email
     ), c AS (
       INSERT INTO contacts AS t (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT new_contact_id, project_id, email, true, set_data, now(), now() FROM input
       ON CONFLICT (project_id, email) DO UPDATE
         SET data = (t.data || EXCLUDED.data) - (SELECT unset_keys FROM input i WHERE i.project_id = t.project_id AND i.email = t.email),
             updated_at = CASE WHEN (t.data || EXCLUDED.data) - (SELECT unset_keys FROM input i WHERE i.project_id = t.project_id AND i.email = t.email) = t.data
               THEN t.updated_at ELSE now() END
       RETURNING t.id, t.project_id, t.email
     )
     INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT i.event_id, i.project_id, c.id, i.name, i.event_data, now() FROM input i JOIN c ON c.project_id = i.project_id AND c.email = i.email
     RETURNING contact_id, id, name, data, created_at`,
    [JSON.stringify(input)],
  );
  const byEvent = new Map(rows.map((r) => [r.id, r]));
  return input.map((i) => {
    const row = byEvent.get(i.event_id)!;
    return {
      contactId: row.contact_id,
      event: { id: row.id, name: row.name, contactId: row.contact_id, data: row.data, createdAt: new Date(row.created_at).toISOString() },
    };
  });
}

export async function getContact(em: EntityManager, projectId: string, id: string): Promise<ContactRow> {
  const [row] = await sql<ContactRow>(em, `SELECT ${COLUMNS} FROM contacts WHERE project_id = ? AND id = ?`, [projectId, id]);
  if (!row) throw notFound('Contact');
  return row;
}

export interface ContactPatch {
  email?: string;
  subscribed?: boolean;
  data?: Pick<ResolvedData, 'set' | 'unset'>;
  snoozedUntil?: Date;
  /** Ends a snooze now (snoozedUntil: null). */
  endSnooze?: boolean;
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
  beforeCommit?: (contact: ContactRow) => Promise<void>,
): Promise<UpsertResult> {
  return transaction(em, async (tx) => {
    const [current] = await sql<ContactRow>(tx, `SELECT ${COLUMNS} FROM contacts WHERE project_id = ? AND id = ? FOR UPDATE`, [projectId, id]);
    if (!current) throw notFound('Contact');
    if (patch.email && patch.email !== current.email) {
      const [taken] = await sql(tx, `SELECT 1 FROM contacts WHERE project_id = ? AND email = ?`, [projectId, patch.email]);
      if (taken) throw conflict(`A contact with email ${patch.email} already exists`, 'CONTACT_EXISTS');
    }
    const snoozeEnded = patch.endSnooze && current.snoozed_until !== null;
    const result = await updateLocked(tx, current, {
      email: patch.email,
      data: patch.data,
      subscribed: snoozeEnded ? true : patch.subscribed,
      snoozedUntil: patch.snoozedUntil,
      eventData: patch.snoozedUntil ? { reason: 'snooze', snoozedUntil: patch.snoozedUntil.toISOString() } : snoozeEnded ? { reason: 'snooze_cancelled' } : {},
    });
    await beforeCommit?.(result.contact);
    return result;
  });
}

/**
 * Ends a snooze that is due: resubscribes the contact only if it still carries exactly this snooze,
 * so running it twice, or after the contact changed, does nothing.
 */
export async function endSnooze(em: EntityManager, contactId: string, snoozedUntil: Date): Promise<{ projectId: string; events: EventRecord[] } | undefined> {
  return transaction(em, async (tx) => {
    const [current] = await sql<ContactRow>(tx, `SELECT ${COLUMNS} FROM contacts WHERE id = ? AND snoozed_until = ? AND snoozed_until <= now() FOR UPDATE`, [
      contactId,
      snoozedUntil,
    ]);
    if (!current) return undefined;
    const result = await updateLocked(tx, current, { subscribed: true, eventData: { reason: 'snooze_expired' } });
    return { projectId: current.project_id, events: result.events };
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
  const [current] = await sql<ContactRow>(em, `SELECT ${COLUMNS} FROM contacts WHERE id = ? FOR UPDATE`, [contactId]);
  if (!current) return [];
  return (await updateLocked(em, current, { subscribed, eventData })).events;
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
  const rows = await sql<ContactRow>(em, `SELECT ${COLUMNS} FROM contacts WHERE project_id = ? AND id = ANY(?::uuid[]) ORDER BY id FOR UPDATE`, [
    projectId,
    ids,
  ]);
  const out = { changed: [] as string[], unchanged: [] as string[], missing: [] as string[], events: [] as EventRecord[] };
  for (const row of rows) {
    const result = await updateLocked(em, row, { subscribed, eventData });
    (result.isUpdate ? out.changed : out.unchanged).push(row.id);
    out.events.push(...result.events);
  }
  const found = new Set(rows.map((r) => r.id));
  out.missing = ids.filter((id) => !found.has(id));
  return out;
}

/** Deletes those of `ids` that belong to the project; everything that hangs off a contact goes with it. */
export async function deleteContactsOf(em: EntityManager, projectId: string, ids: string[]): Promise<{ deleted: string[]; missing: string[] }> {
  const rows = await sql<{ id: string }>(em, `DELETE FROM contacts WHERE project_id = ? AND id = ANY(?::uuid[]) RETURNING id`, [projectId, ids]);
  const deleted = new Set(rows.map((r) => r.id));
  return { deleted: [...deleted], missing: ids.filter((id) => !deleted.has(id)) };
}

export async function deleteContact(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await sql(em, `DELETE FROM contacts WHERE project_id = ? AND id = ? RETURNING id`, [projectId, id]);
  if (rows.length === 0) throw notFound('Contact');
}

export async function lookupContacts(em: EntityManager, projectId: string, emails: string[]) {
  const unique = [...new Set(emails)];
  const found = await sql<{ id: string; email: string }>(em, `SELECT id, email FROM contacts WHERE project_id = ? AND email = ANY(?::text[]) ORDER BY email`, [
    projectId,
    unique,
  ]);
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

/** A project's contacts, from the maintained counts: what was folded plus the deltas not yet folded. */
export async function contactTotal(em: EntityManager, projectId: string): Promise<number> {
  const [c] = await sql<{ n: string }>(
    em,
    `SELECT (SELECT coalesce(sum(n), 0) FROM contact_counts WHERE project_id = ?) + (SELECT coalesce(sum(n), 0) FROM contact_count_deltas WHERE project_id = ?) AS n`,
    [projectId, projectId],
  );
  return Number(c.n);
}

const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** Cursor pages ordered by the sort column then id; `total` only on the first page. */
export async function listContacts(em: EntityManager, projectId: string, q: ListQuery) {
  const column = q.sort === 'email' ? 'email' : 'created_at';
  const where: string[] = ['project_id = ?'];
  const params: unknown[] = [projectId];
  if (q.search) {
    where.push(`email ILIKE ?`);
    params.push(likePattern(q.search.trim().toLowerCase()));
  }
  if (q.subscribed !== undefined) {
    where.push('subscribed = ?');
    params.push(q.subscribed);
  }
  if (q.status === 'subscribed') where.push('subscribed');
  if (q.status === 'unsubscribed') where.push('NOT subscribed AND snoozed_until IS NULL');
  if (q.status === 'snoozed') where.push('snoozed_until IS NOT NULL');
  const filters = where.join(' AND ');
  const filterParams = [...params];
  const unfiltered = where.length === 1;

  if (q.cursor) {
    const [anchor] = await sql<{ v: unknown }>(em, `SELECT ${column} AS v FROM contacts WHERE project_id = ? AND id = ?`, [projectId, q.cursor]);
    if (!anchor) throw simpleBadRequest('Invalid cursor');
    where.push(`(${column}, id) ${q.dir === 'asc' ? '>' : '<'} (?, ?)`);
    params.push(anchor.v, q.cursor);
  }
  const order = q.dir === 'asc' ? 'ASC' : 'DESC';
  const rows = await sql<ContactRow>(em, `SELECT ${COLUMNS} FROM contacts WHERE ${where.join(' AND ')} ORDER BY ${column} ${order}, id ${order} LIMIT ?`, [
    ...params,
    q.limit + 1,
  ]);
  const hasMore = rows.length > q.limit;
  const page = rows.slice(0, q.limit);
  let total = 0;
  if (!q.cursor) {
    // Unfiltered, the maintained per-project count answers without counting.
    total = unfiltered
      ? await contactTotal(em, projectId)
      : Number((await sql<{ n: string }>(em, `SELECT count(*) AS n FROM contacts WHERE ${filters}`, filterParams))[0].n);
  }
  return {
    data: page.map(toContactDto),
    cursor: page.length ? page[page.length - 1].id : '',
    hasMore,
    total,
  };
}
