import type { EntityManager } from '@mikro-orm/postgresql';
import { forbidden } from '../../errors';
import { countsBetween, sumByName } from '../feed';
import { contactTotal } from '../contacts';
import { ProjectBilling } from './billing.entity';
import { lockProjectBilling } from './billing.queries';

export interface BillingLimits {
  /** Emails accepted per calendar month (UTC); null is no cap. */
  emails: number | null;
  /** Contacts the project may hold while it sends; null is no cap. */
  contacts: number | null;
}

/** The current billing period: the calendar month (UTC). */
export function billingPeriod(now = new Date()): { start: Date; end: Date } {
  return {
    start: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
    end: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
  };
}

export async function billingLimits(em: EntityManager, projectId: string): Promise<BillingLimits> {
  // From the database even when the identity map holds the row: a send's transaction judges by these.
  const billing = await em.findOne(ProjectBilling, { projectId }, { refresh: true });
  return { emails: cap(billing?.emailLimit), contacts: cap(billing?.contactLimit) };
}

/** A bigint cap as it arrives (text); null or no row is no cap. */
const cap = (v: string | null | undefined) => (v === null || v === undefined ? null : Number(v));

/** The caps as the emails module's sending context reads them with its own SQL. */
export interface BillingRow {
  email_limit: string | null;
  contact_limit: string | null;
}

export function limitsOf(row: BillingRow | undefined): BillingLimits {
  return { emails: cap(row?.email_limit), contacts: cap(row?.contact_limit) };
}

export async function setBillingLimits(em: EntityManager, projectId: string, limits: BillingLimits): Promise<BillingLimits> {
  const text = (n: number | null) => (n === null ? null : String(n));
  await em.upsert(ProjectBilling, { projectId, emailLimit: text(limits.emails), contactLimit: text(limits.contacts), updatedAt: new Date() });
  return limits;
}

async function usage(em: EntityManager, projectId: string, now = new Date()) {
  const period = billingPeriod(now);
  const byType = sumByName(await countsBetween(em, projectId, 'email', period.start, period.end), true);
  const contacts = await contactTotal(em, projectId);
  const emails = (type: string) => byType.get(`accepted:${type}`) ?? 0;
  return {
    period,
    emails: emails('TRANSACTIONAL') + emails('MARKETING') + emails('HEADLESS'),
    byType: { TRANSACTIONAL: emails('TRANSACTIONAL'), MARKETING: emails('MARKETING'), HEADLESS: emails('HEADLESS') },
    contacts,
  };
}

/** What the project used this period against its caps. */
export async function billingConsumption(em: EntityManager, projectId: string) {
  const [limits, used] = [await billingLimits(em, projectId), await usage(em, projectId)];
  const of = (n: number, limit: number | null) => ({ used: n, limit, remaining: limit === null ? null : Math.max(0, limit - n) });
  return {
    period: { start: used.period.start.toISOString(), end: used.period.end.toISOString() },
    emails: { ...of(used.emails, limits.emails), byType: used.byType },
    contacts: of(used.contacts, limits.contacts),
  };
}

/**
 * Refuses to queue `count` more emails when that would pass the project's monthly email cap, or
 * while it holds more contacts than its contact cap: 403 BILLING_LIMIT_REACHED. Call it inside the
 * transaction that queues them: with a cap set, the project's senders take turns (an advisory lock
 * held to the commit), so concurrent sends cannot pass the cap together. Without caps it costs one
 * primary-key read (and `count`, when a function, is not even called); with `known` caps read just
 * before (the sending context) that say there are none, not even that. Caps that exist are read again here.
 */
export async function assertWithinBillingLimits(
  tx: EntityManager,
  projectId: string,
  howMany: number | (() => Promise<number>),
  known?: BillingLimits,
): Promise<void> {
  if (known && known.emails === null && known.contacts === null) return;
  const limits = await billingLimits(tx, projectId);
  if (limits.emails === null && limits.contacts === null) return;
  await lockProjectBilling(tx, projectId);
  const count = typeof howMany === 'number' ? howMany : await howMany();
  const used = await usage(tx, projectId);
  if (limits.contacts !== null && used.contacts > limits.contacts) {
    throw forbidden(
      `The project holds ${used.contacts} contacts, more than its limit of ${limits.contacts}; sending is paused until it holds fewer or the limit is raised`,
      'BILLING_LIMIT_REACHED',
      {
        details: { category: 'contacts', limit: limits.contacts, used: used.contacts },
        suggestion: 'Raise the limit with PUT /users/@me/projects/:id/billing-limits, or delete contacts',
      },
    );
  }
  if (limits.emails !== null && used.emails + count > limits.emails) {
    throw forbidden(
      `Sending ${count} more email${count === 1 ? '' : 's'} would pass the project's limit of ${limits.emails} this month (${used.emails} used)`,
      'BILLING_LIMIT_REACHED',
      {
        details: { category: 'emails', limit: limits.emails, used: used.emails, requested: count, periodEnd: used.period.end.toISOString() },
        suggestion: 'Raise the limit with PUT /users/@me/projects/:id/billing-limits, or wait for the next period',
      },
    );
  }
}
