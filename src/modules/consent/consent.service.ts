import crypto from 'node:crypto';
import { LockMode } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { newId } from '../../db/ids';
import { type KeyLimit, takeKeyed } from '../../db/rate-limiter';
import { transaction } from '../../db/orm';
import { notFound } from '../../errors';
import type { Links } from '../../mail/links';
import { Project, projectSettings } from '../accounts';
import { Contact, updateContactSubscription } from '../contacts';
import { DomainSchema } from '../domains';
import { type LocalEmailQueue, sendEmails, type SendLimits } from '../emails';
import type { EventRecord } from '../events';
import { sendableBody, Template } from '../templates';
import { ContactTopic, setContactTopics, Topic } from '../topics';
import { clientPrefix } from '../../net/client-prefix';
import { ConsentConfirmation } from './consent.entity';
import { mailboxOf } from './mailbox';

/** Where a request came from: kept as proof of consent. */
export interface RequestOrigin {
  ip: string | null;
  userAgent: string | null;
}

/** Confirmation mails one contact gets per hour at most; more requests stay pending without a mail. */
export const CONFIRMATION_MAILS_PER_HOUR = 3;
/** An address that confirmed this recently gets no new confirmation mail from the form (no mail bombing through it). */
const RECENTLY_CONFIRMED_MS = 3600_000;

export interface ConsentDeps {
  links: Links;
  limits: SendLimits;
  queue?: LocalEmailQueue;
  confirmationExpiryHours: number;
  log: Logger;
}

/** The confirmation mail a project gets until it names a template of its own (`settings.confirmationTemplateId`). */
export const DEFAULT_CONFIRMATION = {
  subject: 'Confirm your subscription to {{projectName}}',
  body:
    '<html><body><p>Please confirm that {{email}} wants to receive {{topics}} from {{projectName}}.</p>' +
    '<p><a href="{{confirmUrl}}">Confirm my subscription</a></p>' +
    '<p>The link works once, until {{expiresAt}}. If you did not ask for this, ignore this message: nothing is sent to you unless you confirm.</p>' +
    '</body></html>',
};

export interface ConfirmationRequest {
  projectId: string;
  contactId: string;
  topicIds: string[];
  subscribeAll: boolean;
  source: string;
  origin: RequestOrigin;
}

const topicNames = async (em: EntityManager, projectId: string, ids: string[]) =>
  ids.length ? (await em.find(Topic, { projectId, id: { $in: ids } }, { orderBy: { name: 'asc' } })).map((t) => t.name) : [];

/** The sender of confirmation mail without a template: no-reply@ the project's first verified domain. */
async function defaultSender(em: EntityManager, projectId: string, projectName: string) {
  const domain = await em.findOne(DomainSchema, { projectId, status: 'verified' }, { orderBy: { createdAt: 'asc' } });
  return domain ? { email: `no-reply@${domain.domain}`, name: projectName } : undefined;
}

/**
 * Confirmation mails the form sends per hour to one mailbox (its address's spellings together:
 * `mailboxOf`), and to the addresses asked for from one network (an IPv4 /24, an IPv6 /64).
 */
export const FORM_CONFIRMATION_LIMITS: { perMailbox: KeyLimit; perNetwork: KeyLimit } = {
  perMailbox: { limit: CONFIRMATION_MAILS_PER_HOUR, windowSeconds: 3600 },
  perNetwork: { limit: 30, windowSeconds: 3600 },
};

// Counters are keyed by a hash: the rate-limit table holds no address or network in clear.
const counterKey = (kind: string, value: string) => `confirmation-${kind}:${crypto.createHash('sha256').update(value).digest('base64url')}`;

/** Why no mail goes out for a new confirmation, or undefined when one may. */
async function mailRefusal(em: EntityManager, req: ConfirmationRequest): Promise<string | undefined> {
  const { contactId, source } = req;
  const since = new Date(Date.now() - RECENTLY_CONFIRMED_MS);
  // The public form is where strangers can ask; the API and imports come from the project itself.
  if (source === 'subscribe_form' && (await em.count(ConsentConfirmation, { contactId, confirmedAt: { $gt: since } })) > 0) return 'confirmed_recently';
  if ((await em.count(ConsentConfirmation, { contactId, mailedAt: { $gt: since } })) >= CONFIRMATION_MAILS_PER_HOUR) return 'rate_limited';
  if (source === 'subscribe_form') {
    // `a+1@`, `a+2@`, `a.b@gmail.com` are other contacts but one reader's mailbox: counted together.
    const contact = await em.findOneOrFail(Contact, { id: contactId }, { fields: ['email'] });
    const mailbox = await takeKeyed(em, req.projectId, counterKey('mailbox', mailboxOf(contact.email)), FORM_CONFIRMATION_LIMITS.perMailbox);
    if (!mailbox.allowed) return 'rate_limited';
    const network = await takeKeyed(em, req.projectId, counterKey('network', clientPrefix(req.origin.ip, 24)), FORM_CONFIRMATION_LIMITS.perNetwork);
    if (!network.allowed) return 'rate_limited';
  }
  return undefined;
}

/**
 * Records a double opt-in request and mails the contact its confirmation link through the project's
 * ordinary transactional pipeline (dev mailbox, activity, webhooks). Call it after the pending state is
 * committed. A failure to mail is logged, never thrown: the subscription simply stays pending.
 */
export async function requestConfirmation(em: EntityManager, deps: ConsentDeps, req: ConfirmationRequest): Promise<ConsentConfirmation> {
  const refusal = await mailRefusal(em, req);
  const confirmation = em.create(ConsentConfirmation, {
    id: newId(),
    projectId: req.projectId,
    contactId: req.contactId,
    topicIds: req.topicIds,
    subscribeAll: req.subscribeAll,
    source: req.source,
    requestedIp: req.origin.ip,
    requestedUserAgent: req.origin.userAgent,
    expiresAt: new Date(Date.now() + deps.confirmationExpiryHours * 3600_000),
  });
  await em.persist(confirmation).flush();
  if (refusal) {
    deps.log.info({ projectId: req.projectId, contactId: req.contactId, reason: refusal }, 'no confirmation mail sent');
    return confirmation;
  }
  try {
    const emailId = await mailConfirmation(em, deps, confirmation);
    if (emailId) {
      Object.assign(confirmation, { mailedAt: new Date(), emailId });
      await em.flush();
    }
  } catch (err) {
    deps.log.warn({ err, projectId: req.projectId, contactId: req.contactId }, 'confirmation mail not queued');
  }
  return confirmation;
}

/** Queues the confirmation mail; answers its email's id, or undefined when none could be sent. */
async function mailConfirmation(em: EntityManager, deps: ConsentDeps, c: ConsentConfirmation): Promise<string | undefined> {
  const [project, contact, settings] = await Promise.all([
    em.findOneOrFail(Project, { id: c.projectId }),
    em.findOneOrFail(Contact, { id: c.contactId }),
    projectSettings(em, c.projectId),
  ]);
  const template = settings.confirmationTemplateId ? await em.findOne(Template, { projectId: c.projectId, id: settings.confirmationTemplateId }) : null;
  const sender = template ? { email: template.fromEmail, name: template.fromName } : await defaultSender(em, c.projectId, project.name);
  if (!sender) {
    deps.log.warn({ projectId: c.projectId }, 'no confirmation mail: the project has no verified sender domain');
    return undefined;
  }
  const names = await topicNames(em, c.projectId, c.topicIds);
  const value = (v: unknown) => ({ value: v, persistent: false });
  const sent = await sendEmails(
    em,
    c.projectId,
    {
      to: contact.email,
      from: { email: sender.email, name: sender.name ?? undefined },
      reply: template?.replyTo ?? undefined,
      subject: template?.subject ?? DEFAULT_CONFIRMATION.subject,
      body: template ? sendableBody(template) : DEFAULT_CONFIRMATION.body,
      data: {
        confirmUrl: value(deps.links.confirmation(c.id)),
        topics: value(names.length ? names.join(', ') : 'email'),
        topicNames: value(names),
        projectName: value(project.name),
        expiresAt: value(c.expiresAt.toISOString()),
      },
      // A confirmation link must reach the reader as it is: no click-tracking redirect, no open pixel.
      tracking: { opens: false, clicks: false },
    },
    { links: deps.links, limits: deps.limits, queue: deps.queue },
  );
  return sent.emails[0]?.email;
}

export type ConfirmationView =
  { state: 'invalid' } | { state: 'expired' | 'used' | 'open' | 'confirmed'; email: string; topics: string[]; projectName: string };

/** A confirmation named by a signed link, as its page shows it; changes nothing. */
export async function viewConfirmation(em: EntityManager, links: Links, id: string, token: string | undefined): Promise<ConfirmationView> {
  if (!links.verifyConfirmation(id, token)) return { state: 'invalid' };
  const c = await em.findOne(ConsentConfirmation, { id });
  return c ? describe(em, c, c.confirmedAt ? 'used' : c.expiresAt <= new Date() ? 'expired' : 'open') : { state: 'invalid' };
}

async function describe(em: EntityManager, c: ConsentConfirmation, state: 'expired' | 'used' | 'open' | 'confirmed'): Promise<ConfirmationView> {
  const contact = await em.findOne(Contact, { id: c.contactId });
  const project = await em.findOne(Project, { id: c.projectId });
  if (!contact || !project) return { state: 'invalid' };
  return { state, email: contact.email, topics: await topicNames(em, c.projectId, c.topicIds), projectName: project.name };
}

/**
 * Follows a confirmation link (POST): once, before it expires. Subscribes the topics still pending (and
 * the contact globally when the request asked for it), recording contact.subscribed events, and stores
 * the confirming request's time, IP and user agent beside the original request's.
 */
export async function confirm(
  em: EntityManager,
  links: Links,
  id: string,
  token: string | undefined,
  origin: RequestOrigin,
): Promise<{ view: ConfirmationView; projectId?: string; contactId?: string; events: EventRecord[] }> {
  if (!links.verifyConfirmation(id, token)) return { view: { state: 'invalid' }, events: [] };
  return transaction(em, async (tx) => {
    // Locked: two clicks at once confirm once.
    const c = await tx.findOne(ConsentConfirmation, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    if (!c) return { view: { state: 'invalid' }, events: [] };
    if (c.confirmedAt) return { view: await describe(tx, c, 'used'), events: [] };
    if (c.expiresAt <= new Date()) return { view: await describe(tx, c, 'expired'), events: [] };
    const stillPending = c.topicIds.length
      ? (await tx.find(ContactTopic, { contactId: c.contactId, topicId: { $in: c.topicIds }, state: 'pending' })).map((r) => r.topicId)
      : [];
    const eventData = { confirmationId: c.id };
    const topics = await setContactTopics(tx, c.projectId, c.contactId, Object.fromEntries(stillPending.map((t) => [t, true])), {
      source: 'double_opt_in',
      confirmed: true,
      eventData,
    });
    const global = c.subscribeAll ? await updateContactSubscription(tx, c.contactId, true, { reason: 'double_opt_in', ...eventData }) : [];
    Object.assign(c, { confirmedAt: new Date(), confirmedIp: origin.ip, confirmedUserAgent: origin.userAgent });
    await tx.flush();
    return { view: await describe(tx, c, 'confirmed'), projectId: c.projectId, contactId: c.contactId, events: [...global, ...topics.events] };
  });
}

export const toConsentDto = (c: ConsentConfirmation) => ({
  id: c.id,
  status: c.confirmedAt ? ('confirmed' as const) : c.expiresAt <= new Date() ? ('expired' as const) : ('pending' as const),
  source: c.source,
  topicIds: c.topicIds,
  subscribeAll: c.subscribeAll,
  requestedAt: c.requestedAt.toISOString(),
  requestedIp: c.requestedIp,
  requestedUserAgent: c.requestedUserAgent,
  mailedAt: c.mailedAt?.toISOString() ?? null,
  expiresAt: c.expiresAt.toISOString(),
  confirmedAt: c.confirmedAt?.toISOString() ?? null,
  confirmedIp: c.confirmedIp,
  confirmedUserAgent: c.confirmedUserAgent,
});

/** A contact's consent record: every double opt-in request, newest first. */
export async function consentOf(em: EntityManager, projectId: string, contactId: string) {
  const contact = await em.findOne(Contact, { projectId, id: contactId }, { fields: ['id'] });
  if (!contact) throw notFound('Contact');
  const rows = await em.find(ConsentConfirmation, { projectId, contactId }, { orderBy: { requestedAt: 'desc', id: 'desc' } });
  return { data: rows.map(toConsentDto) };
}
