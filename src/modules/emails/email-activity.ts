import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { updateContactSubscription } from '../contacts/contacts.service';
import { type EventRecord, insertEvents } from '../events/events.store';

export type EmailActivity =
  | { kind: 'delivery' }
  | { kind: 'open' }
  | { kind: 'click'; link: string }
  | { kind: 'bounce'; bounceType: 'Permanent' | 'Transient' | 'Undetermined' }
  | { kind: 'complaint' };

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

interface Updated {
  id: string;
  project_id: string;
  contact_id: string;
  template_id: string | null;
  campaign_id: string | null;
  message_id: string;
  first: boolean;
  /** A click on an email nobody had opened yet also counts as its first open. */
  first_open: boolean;
}

/**
 * Records what happened to a sent email, from tracking or from the provider. The status only moves up
 * (SENT < DELIVERED < OPENED < CLICKED < BOUNCED < COMPLAINED: events arrive out of order); `openedAt`
 * and `clickedAt` keep the first time while the counters count every event; a permanent bounce or a
 * complaint unsubscribes the contact. A transient bounce is recorded only. Runs in one transaction;
 * answers the events written, or undefined when the email is unknown.
 */
export interface RecordedActivity {
  projectId: string;
  contactId: string;
  events: EventRecord[];
}

export async function recordEmailActivity(em: EntityManager, emailId: string, activity: EmailActivity): Promise<RecordedActivity | undefined> {
  return em.transactional(async (tx) => {
    const status = STATUS_OF[activity.kind];
    const downgradable = activity.kind === 'bounce' && activity.bounceType !== 'Permanent';
    const [row] = await sql<Updated>(
      tx,
      `WITH before AS (SELECT id, opened_at, clicked_at, delivered_at, bounced_at, complained_at FROM emails WHERE id = ? FOR UPDATE)
       UPDATE emails e SET
         status = CASE WHEN ? AND email_status_rank(?) > email_status_rank(e.status) AND e.status <> 'FAILED' THEN ? ELSE e.status END,
         delivered_at = CASE WHEN ? = 'delivery' THEN coalesce(e.delivered_at, now()) ELSE e.delivered_at END,
         opened_at = CASE WHEN ? IN ('open', 'click') THEN coalesce(e.opened_at, now()) ELSE e.opened_at END,
         clicked_at = CASE WHEN ? = 'click' THEN coalesce(e.clicked_at, now()) ELSE e.clicked_at END,
         bounced_at = CASE WHEN ? = 'bounce' THEN coalesce(e.bounced_at, now()) ELSE e.bounced_at END,
         complained_at = CASE WHEN ? = 'complaint' THEN coalesce(e.complained_at, now()) ELSE e.complained_at END,
         open_count = e.open_count + CASE WHEN ? = 'open' THEN 1 ELSE 0 END,
         click_count = e.click_count + CASE WHEN ? = 'click' THEN 1 ELSE 0 END,
         updated_at = now()
       FROM before WHERE e.id = before.id
       RETURNING e.id, e.project_id, e.contact_id, e.template_id, e.campaign_id, e.message_id,
         CASE ? WHEN 'open' THEN before.opened_at IS NULL WHEN 'click' THEN before.clicked_at IS NULL
           WHEN 'delivery' THEN before.delivered_at IS NULL WHEN 'bounce' THEN before.bounced_at IS NULL
           ELSE before.complained_at IS NULL END AS first,
         before.opened_at IS NULL AS first_open`,
      [
        emailId,
        // A transient bounce is recorded, but does not make the email BOUNCED.
        !downgradable,
        status,
        status,
        ...Array(7).fill(activity.kind),
        activity.kind,
      ],
    );
    if (!row) return undefined;
    const data: Record<string, unknown> = {
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
      await sql(tx, `UPDATE campaigns SET ${counters.map((c) => `${c} = ${c} + 1`).join(', ')}, updated_at = now() WHERE id = ?`, [row.campaign_id]);
    }
    const unsubscribes = (activity.kind === 'bounce' && activity.bounceType === 'Permanent') || activity.kind === 'complaint';
    if (unsubscribes) {
      const reason = activity.kind === 'complaint' ? 'complaint' : 'bounce';
      events.push(...(await updateContactSubscription(tx, row.contact_id, false, { reason, emailId: row.id })));
    }
    return { projectId: row.project_id, contactId: row.contact_id, events };
  });
}
