import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { type KeyLimit, takeKeyed } from '../../db/rate-limiter';
import { transaction } from '../../db/orm';
import { AppError } from '../../errors';
import { escapeHtml } from '../../mail/render';
import { Contact, resolveDataMap, updateContactSubscription, upsertContact } from '../contacts';
import type { EventRecord } from '../events';
import { Project, projectSettings } from '../accounts';
import { ContactTopic, setContactTopics, Topic, unknownTopics } from '../topics';
import { type ConsentDeps, type RequestOrigin, requestConfirmation } from './consent.service';
import type { SubscribeInput } from './consent.schemas';
import { mailboxOf } from './mailbox';

/** The form's limits: per visitor's IP address and per email address, each a fixed one-hour window. */
export const SUBSCRIBE_LIMITS: { perIp: KeyLimit; perAddress: KeyLimit } = {
  perIp: { limit: 20, windowSeconds: 3600 },
  perAddress: { limit: 5, windowSeconds: 3600 },
};

/** The hidden field a person never fills and a form-filling bot does. */
export const HONEYPOT_FIELD = '_gotcha';

// Counters are keyed by a hash: the rate-limit table holds no address or IP in clear.
const counterKey = (kind: string, value: string) => `subscribe-${kind}:${crypto.createHash('sha256').update(value).digest('base64url')}`;

function tooMany(limit: KeyLimit, resetSeconds: number): AppError {
  return new AppError(429, 'RATE_LIMIT_EXCEEDED', `Too many subscribe requests: at most ${limit.limit} per hour`, {
    headers: { 'Retry-After': String(resetSeconds) },
    details: { limit: limit.limit, retryAfterSeconds: resetSeconds },
  });
}

/**
 * POST /v1/subscribe: creates the contact if needed (with `data`, only when new: the public key is
 * public, so the form must not rewrite a known contact's data), then subscribes the topics, or the
 * contact globally when none are given, with double opt-in where it applies. Answers nothing that
 * depends on the address: the caller always says `{ success: true }`.
 */
export async function subscribe(
  em: EntityManager,
  deps: ConsentDeps,
  projectId: string,
  input: SubscribeInput,
  origin: RequestOrigin,
): Promise<{ contactId?: string; events: EventRecord[] }> {
  const byIp = await takeKeyed(em, projectId, counterKey('ip', origin.ip ?? '-'), SUBSCRIBE_LIMITS.perIp);
  if (!byIp.allowed) throw tooMany(SUBSCRIBE_LIMITS.perIp, byIp.resetSeconds);
  // A filled honeypot is answered as a success and does nothing more.
  if (input[HONEYPOT_FIELD]) return { events: [] };
  // Per mailbox: the spellings of one address (`+tags`, Gmail's dots) share the address's limit.
  const byAddress = await takeKeyed(em, projectId, counterKey('address', mailboxOf(input.email)), SUBSCRIBE_LIMITS.perAddress);
  if (!byAddress.allowed) throw tooMany(SUBSCRIBE_LIMITS.perAddress, byAddress.resetSeconds);

  const topicIds = [...new Set(input.topics ?? [])];
  const topics = topicIds.length ? await em.find(Topic, { projectId, id: { $in: topicIds } }) : [];
  // A private topic is refused as another project's is: the form never says which ids exist.
  const missing = topicIds.filter((id) => !topics.some((t) => t.id === id && t.public));
  if (missing.length) throw unknownTopics(missing);
  // Whether this signup waits for a confirmation: any of its topics' setting, else the project's.
  const projectDoubleOptIn = (await projectSettings(em, projectId)).doubleOptIn;
  const doubleOptIn = topics.length ? topics.some((t) => t.doubleOptIn ?? projectDoubleOptIn) : projectDoubleOptIn;

  const outcome = await transaction(em, async (tx) => {
    const known = (await tx.count(Contact, { projectId, email: input.email })) > 0;
    const data = known ? { set: {}, unset: [] } : resolveDataMap(input.data);
    const { contact, events } = await upsertContact(tx, projectId, { email: input.email, defaultSubscribed: false, data });
    const subscribed = contact.subscribed;
    // Anyone can post any address: an opt-out (an unsubscription, a complaint, a hard bounce: each leaves
    // the contact or the topic unsubscribed) is lifted only by its owner following a confirmation link.
    const optedOut =
      (known && !subscribed) ||
      (topicIds.length > 0 && (await tx.count(ContactTopic, { contactId: contact.id, topicId: { $in: topicIds }, state: 'unsubscribed' })) > 0);
    const confirmFirst = doubleOptIn || optedOut;
    const changed = await setContactTopics(tx, projectId, contact.id, Object.fromEntries(topicIds.map((t) => [t, true])), {
      source: 'subscribe_form',
      confirmFirst: optedOut,
    });
    events.push(...changed.events);
    // A topic means nothing to a contact unsubscribed from all, so the form's signup subscribes it
    // globally too: at once for a contact this post created, else on confirmation.
    if (!subscribed && !confirmFirst) events.push(...(await updateContactSubscription(tx, contact.id, true, { reason: 'subscribe_form' })));
    return { contactId: contact.id, subscribed, confirmFirst, pending: changed.pending, events };
  });

  if (outcome.pending.length || (!outcome.subscribed && outcome.confirmFirst)) {
    await requestConfirmation(em, deps, {
      projectId,
      contactId: outcome.contactId,
      // Every topic asked for, as the mail names them; confirming changes those still pending.
      topicIds,
      subscribeAll: !outcome.subscribed,
      source: 'subscribe_form',
      origin,
    });
  }
  return { contactId: outcome.contactId, events: outcome.events };
}

/** `GET /subscribe-form`: where the form posts, and its snippet with a box per public topic, by name. */
export async function subscribeFormOf(em: EntityManager, publicUrl: string, projectId: string): Promise<{ action: string; html: string }> {
  const project = await em.findOneOrFail(Project, { id: projectId });
  const topics = await em.find(Topic, { projectId, public: true }, { orderBy: { name: 'asc', id: 'asc' } });
  return { action: `${publicUrl}/v1/subscribe?key=${project.publicKey}`, html: subscribeSnippet(publicUrl, project.publicKey, topics) };
}

/** The copyable form for a site: posts to /v1/subscribe?key=<publicKey>, one checkbox per public topic. */
export function subscribeSnippet(publicUrl: string, publicKey: string, topics: Array<{ id: string; name: string }>): string {
  const boxes = topics.map((t) => `    <label><input type="checkbox" name="topics" value="${escapeHtml(t.id)}"> ${escapeHtml(t.name)}</label>\n`).join('');
  return (
    `<form method="post" action="${escapeHtml(publicUrl)}/v1/subscribe?key=${escapeHtml(publicKey)}">\n` +
    `  <label for="postbox-email">Email</label>\n` +
    `  <input id="postbox-email" type="email" name="email" required autocomplete="email">\n` +
    (boxes ? `  <fieldset>\n    <legend>Topics</legend>\n${boxes}  </fieldset>\n` : '') +
    `  <!-- Leave this field hidden and empty: bots fill it, people do not. -->\n` +
    `  <input type="text" name="${HONEYPOT_FIELD}" tabindex="-1" autocomplete="off" aria-hidden="true" style="position:absolute;left:-9999px">\n` +
    `  <button type="submit">Subscribe</button>\n` +
    `</form>\n`
  );
}
