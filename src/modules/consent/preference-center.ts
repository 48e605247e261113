import type { EntityManager } from '@mikro-orm/postgresql';
import { isUuid } from '../../db/ids';
import { transaction } from '../../db/orm';
import type { Links } from '../../mail/links';
import { escapeHtml } from '../../mail/render';
import { Contact, updateContactSubscription } from '../contacts';
import type { EventRecord } from '../events';
import { setContactTopics, Topic, topicStatesOf, type TopicState } from '../topics';

/** One public topic as the preference center lists it. */
interface Row {
  id: string;
  name: string;
  description: string | null;
  state: TopicState;
}

export interface Preferences {
  contact: Contact;
  topics: Row[];
}

/** The contact's public topics with their states; private topics never appear on the page. */
export async function preferencesOf(em: EntityManager, contact: Contact): Promise<Preferences> {
  const [topics, states] = await Promise.all([
    em.find(Topic, { projectId: contact.projectId, public: true }, { orderBy: { name: 'asc', id: 'asc' } }),
    topicStatesOf(em, contact.projectId, contact.id),
  ]);
  return { contact, topics: topics.map((t) => ({ id: t.id, name: t.name, description: t.description, state: states[t.id] ?? 'unsubscribed' })) };
}

/** The contact a signed preference link names, or undefined where the link does not hold; no project is known here. */
export async function contactOfLink(em: EntityManager, links: Links, id: string, token: string | undefined): Promise<Contact | undefined> {
  return isUuid(id) && links.verifyContact(id, token) ? ((await em.findOne(Contact, { id })) ?? undefined) : undefined;
}

/** What the form posts: the boxes checked, the boxes as they were shown, and the global choice. */
export interface PreferenceForm {
  checked: Set<string>;
  shown: Set<string>;
  unsubscribeAll: boolean;
}

const list = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : typeof v === 'string' && v ? [v] : []);

export function readPreferenceForm(body: unknown): PreferenceForm {
  const b = (body ?? {}) as Record<string, unknown>;
  return { checked: new Set(list(b.topics)), shown: new Set(list(b.shown)), unsubscribeAll: b.unsubscribeAll !== undefined && b.unsubscribeAll !== '' };
}

/**
 * Saves the form: a public topic changes only where its box differs from how the page showed it (so a
 * pending topic shown unchecked stays pending unless the reader checks it), and the global flag
 * follows "unsubscribe from all". Joining here is confirmed: the reader opened a link mailed to the
 * address. Every change is an event (activity feed, webhooks).
 */
export async function savePreferences(em: EntityManager, contact: Contact, form: PreferenceForm): Promise<EventRecord[]> {
  return transaction(em, async (tx) => {
    const topics = await tx.find(Topic, { projectId: contact.projectId, public: true }, { fields: ['id'] });
    const changes: Record<string, boolean> = {};
    for (const { id } of topics) {
      const want = form.checked.has(id);
      if (want !== form.shown.has(id)) changes[id] = want;
    }
    const events: EventRecord[] = [];
    events.push(...(await setContactTopics(tx, contact.projectId, contact.id, changes, { source: 'preference_center', confirmed: true })).events);
    // Only a real change of the box: saving topics must not end a snooze by writing `subscribed` again.
    const current = await tx.findOneOrFail(Contact, { id: contact.id }, { refresh: true });
    if (current.subscribed === form.unsubscribeAll) {
      events.push(...(await updateContactSubscription(tx, contact.id, !form.unsubscribeAll, { reason: 'preference_center' })));
    }
    return events;
  });
}

/** Saves the form (`savePreferences`) and answers the page's preferences as they are after it, with the events to publish. */
export async function savePreferenceForm(
  em: EntityManager,
  contact: Contact,
  form: PreferenceForm,
): Promise<{ events: EventRecord[]; preferences: Preferences }> {
  const events = await savePreferences(em, contact, form);
  const fresh = await em.findOneOrFail(Contact, { id: contact.id }, { refresh: true });
  return { events, preferences: await preferencesOf(em, fresh) };
}

const STATE_NOTE: Record<TopicState, string> = { subscribed: '', unsubscribed: '', pending: ' (waiting for your confirmation: check it to join now)' };

/** The page: a plain form (works without JavaScript), every input labelled, grouped in fieldsets. */
export function preferencePage(p: Preferences, action: string, saved: boolean): string {
  const c = p.contact;
  const boxes = p.topics
    .map((t) => {
      const id = `topic-${t.id}`;
      const checked = t.state === 'subscribed';
      const desc = t.description ? `<span class="desc" id="${id}-desc">${escapeHtml(t.description)}</span>` : '';
      return (
        `<div class="topic"><input type="checkbox" id="${id}" name="topics" value="${t.id}"${checked ? ' checked' : ''}` +
        `${t.description ? ` aria-describedby="${id}-desc"` : ''}> <label for="${id}">${escapeHtml(t.name)}${escapeHtml(STATE_NOTE[t.state])}</label>${desc}` +
        (checked ? `<input type="hidden" name="shown" value="${t.id}">` : '') +
        `</div>`
      );
    })
    .join('');
  const topics = p.topics.length ? `<fieldset><legend>Topics</legend>${boxes}</fieldset>` : '';
  const status = saved ? `<p class="saved" role="status">Your preferences are saved.</p>` : '';
  return (
    `${status}<p>Email preferences for <b>${escapeHtml(c.email)}</b>.</p>` +
    `<form method="post" action="${escapeHtml(action)}">${topics}` +
    `<fieldset><legend>All marketing email</legend>` +
    `<div class="topic"><input type="checkbox" id="unsubscribe-all" name="unsubscribeAll" value="1"${c.subscribed ? '' : ' checked'}>` +
    ` <label for="unsubscribe-all">Unsubscribe from all marketing email</label>` +
    `<span class="desc">Overrides the topics above; transactional email (receipts, password resets) still arrives.</span></div></fieldset>` +
    `<button type="submit">Save preferences</button></form>`
  );
}
