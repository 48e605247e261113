import type { EntityManager } from '@mikro-orm/postgresql';
import { transaction } from '../../db/orm';
import { updateContactSubscription } from '../contacts';
import { type EventRecord, insertEvents } from '../events';
import { suppressAutomatically } from '../suppressions';
import { applyEmailActivity, countFirstActivity, type EmailActivityRow, recentDeliveryEvents } from './emails.queries';

export type BounceType = 'Permanent' | 'Transient' | 'Undetermined';

/**
 * What happened to a sent email. A bounce or complaint may carry what the report said (sub-type, status,
 * diagnostic, reporting MTA, feedback type...), kept in the event's data in SES's vocabulary.
 */
export type EmailActivity =
  | { kind: 'delivery' }
  | { kind: 'open' }
  | { kind: 'click'; link: string }
  | {
      kind: 'bounce';
      bounceType: BounceType;
      details?: Record<string, unknown>;
      /** Refused during the SMTP session: the message never left, so the email is BOUNCED whatever the type (else it stays QUEUED and goes again). */
      refused?: boolean;
    }
  | { kind: 'complaint'; details?: Record<string, unknown> };

/** How reported trouble unsubscribes a contact beyond the fixed rules; 0 turns the soft-bounce rule off. */
export interface SuppressionRules {
  softBounceLimit: number;
}

const STATUS_OF: Record<EmailActivity['kind'], string> = {
  delivery: 'DELIVERED',
  open: 'OPENED',
  click: 'CLICKED',
  bounce: 'BOUNCED',
  complaint: 'COMPLAINED',
};

/** The campaign counter each first-of-its-kind event moves (a transient bounce counts as a bounce). */
const COUNTER_OF: Record<EmailActivity['kind'], string> = {
  delivery: 'delivered_count',
  open: 'opened_count',
  click: 'clicked_count',
  bounce: 'bounced_count',
  complaint: 'complained_count',
};

const EVENT_OF: Record<EmailActivity['kind'], string> = {
  delivery: 'email.delivery',
  open: 'email.open',
  click: 'email.click',
  bounce: 'email.bounce',
  complaint: 'email.complaint',
};

/**
 * Records what happened to a sent email, from tracking or from the provider. The status only moves up
 * (SENT < DELIVERED < OPENED < CLICKED < BOUNCED < COMPLAINED: events arrive out of order); `openedAt`
 * and `clickedAt` keep the first time while the counters count every event; a permanent bounce or a
 * complaint unsubscribes the contact. A transient bounce is recorded only (the email BOUNCED only when it was refused
 * in the SMTP session). Runs in one transaction; answers the events written, or undefined when the email is unknown.
 */
export interface RecordedActivity {
  projectId: string;
  contactId: string;
  events: EventRecord[];
}

export async function recordEmailActivity(
  em: EntityManager,
  emailId: string,
  activity: EmailActivity,
  rules: SuppressionRules = { softBounceLimit: 0 },
): Promise<RecordedActivity | undefined> {
  // Joined when the caller is in a transaction already (an SES notification, a batch of MX reports).
  return transaction(em, async (tx) => {
    const status = STATUS_OF[activity.kind];
    const downgradable = activity.kind === 'bounce' && activity.bounceType !== 'Permanent' && !activity.refused;
    // A report about an email already bounced or complained about (a second DSN, the same complaint
    // twice) changes nothing and counts nothing: `changed` is then empty and only `before` answers.
    const found = await applyEmailActivity(tx, emailId, activity.kind, status, !downgradable);
    if (!found) return undefined;
    if (!found.id) return { projectId: found.before_project_id, contactId: found.before_contact_id, events: [] };
    const row = found as EmailActivityRow;
    const data: Record<string, unknown> = {
      ...(activity.kind === 'bounce' || activity.kind === 'complaint' ? activity.details : {}),
      emailId: row.id,
      messageId: row.message_id,
      templateId: row.template_id,
      campaignId: row.campaign_id,
    };
    if (activity.kind === 'open') data.isFirstOpen = row.first;
    if (activity.kind === 'click') {
      data.link = activity.link;
      data.isFirstClick = row.first;
    }
    if (activity.kind === 'bounce') data.bounceType = activity.bounceType;
    const events = await insertEvents(tx, [{ projectId: row.project_id, contactId: row.contact_id, name: EVENT_OF[activity.kind], data }]);
    if (row.campaign_id && row.first) {
      const counters = activity.kind === 'click' && row.first_open ? [COUNTER_OF.click, COUNTER_OF.open] : [COUNTER_OF[activity.kind]];
      await countFirstActivity(tx, row.campaign_id, counters);
    }
    const unsubscribes =
      (activity.kind === 'bounce' && activity.bounceType === 'Permanent') ||
      activity.kind === 'complaint' ||
      (activity.kind === 'bounce' && (await softBouncesInARow(tx, row, rules.softBounceLimit)));
    if (unsubscribes) {
      const reason = activity.kind === 'complaint' ? 'complaint' : activity.bounceType === 'Permanent' ? 'bounce' : 'soft-bounce';
      events.push(...(await updateContactSubscription(tx, row.contact_id, false, { reason, emailId: row.id })));
      // The address is suppressed too: the subscription covers marketing mail only, the list every message.
      await suppressAutomatically(tx, row.project_id, {
        email: row.to_email,
        reason: activity.kind === 'complaint' ? 'COMPLAINT' : 'BOUNCE',
        emailId: row.id,
        detail: suppressionDetail(activity as Extract<EmailActivity, { kind: 'bounce' | 'complaint' }>, rules.softBounceLimit),
      });
    }
    return { projectId: row.project_id, contactId: row.contact_id, events };
  });
}

/**
 * Whether the contact's latest `limit` reports are soft bounces of as many different emails, with no
 * delivery, open or click (nor a hard bounce) after the first of them: an address that has stopped
 * taking mail without saying so for good. Reads the contact's own events, newest first.
 */
async function softBouncesInARow(em: EntityManager, bounced: Pick<EmailActivityRow, 'id' | 'project_id' | 'contact_id'>, limit: number): Promise<boolean> {
  if (limit <= 0) return false;
  const recent = await recentDeliveryEvents(em, bounced.project_id, bounced.contact_id, limit * 4);
  // This bounce counts whether or not its event is written yet (a batch writes its events at its end).
  const softEmails = new Set<string>([bounced.id]);
  for (const e of recent) {
    if (softEmails.size >= limit) break;
    if (e.name !== 'email.bounce' || e.bounce_type === 'Permanent') break;
    if (e.email_id) softEmails.add(e.email_id);
  }
  return softEmails.size >= limit;
}

/** What an automatic suppression's `detail` says: the report's own words where it has them. */
function suppressionDetail(activity: Extract<EmailActivity, { kind: 'bounce' | 'complaint' }>, softBounceLimit: number): string {
  const d = activity.details ?? {};
  const said = (key: string) => (typeof d[key] === 'string' && d[key] ? (d[key] as string) : undefined);
  const source = said('source') ? ` (${said('source')})` : '';
  if (activity.kind === 'complaint') return `complaint${said('complaintFeedbackType') ? `: ${said('complaintFeedbackType')}` : ''}${source}`;
  if (activity.bounceType !== 'Permanent') {
    const last = said('diagnosticCode') ? `, the last: ${said('diagnosticCode')}` : '';
    return `soft-bounce limit reached: ${softBounceLimit} soft bounces in a row${last}${source}`;
  }
  const words = said('diagnosticCode') ?? [said('bounceSubType'), said('status')].filter(Boolean).join(' ');
  return `hard bounce${words ? `: ${words}` : ''}${source}`;
}
