import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { CLAIM_SECONDS } from '../../delivery';
import { applyData, type ResolvedData } from '../contacts';
import { EVENT_RECORD_COLUMNS, type EventRecord, type ReturnedEvent, toEventRecord } from '../events';
import type { BillingRow } from '../billing';
import type { Domain } from '../domains';
import { suppressedAmong, type SuppressionVerdict } from '../suppressions';
import type { QueuedEmailInput } from './emails.service';
import type { KnownContact } from './sending-context';

/**
 * Queueing mail: the statements of /v1/send, SMTP submission, campaigns' tests and automations' SEND_EMAIL
 * steps. /v1/send is the hot path (docs/performance.md): a send is one statement (`queueSends`), shared by
 * concurrent sends, where the unit of work would write a contact, an email and an idempotency key apart.
 */

/** Dispatchers LISTEN here; sent by the statement that queues mail, so they wake when its transaction commits. */
export const EMAIL_QUEUED_CHANNEL = 'postbox_email_queued';

/** The Message-ID of an email: its id at its sender's domain. */
export const messageIdOf = (e: QueuedEmailInput) => `<${e.id}@${e.from.email.slice(e.from.email.lastIndexOf('@') + 1)}>`;

/** An email's columns from `template_id` to `message_id`, in the order both queueing statements insert them. */
const messageValues = (e: QueuedEmailInput) => [
  e.templateId,
  e.type,
  e.from.email,
  e.from.name,
  e.replyTo,
  e.to.email,
  e.to.name,
  e.message.subject,
  e.message.html,
  e.message.text,
  JSON.stringify(e.message.headers),
  messageIdOf(e),
];

/**
 * Stores one rendered email as QUEUED in the caller's transaction, and NOTIFYs the dispatchers in the
 * same statement (delivered when the transaction commits; PostgreSQL sends one notification for all of
 * a transaction's identical ones, so a 50-recipient send still wakes them once), unless `notify` is
 * false: the caller tells a drain of its own process after the commit. `ON CONFLICT` makes a retried
 * caller with a derived id harmless, and then nothing is notified.
 */
export async function queueEmail(em: EntityManager, e: QueuedEmailInput, notify = true): Promise<boolean> {
  const rows = await sql(
    em,
    `WITH queued AS (
       INSERT INTO emails (id, project_id, contact_id, template_id, type, from_email, from_name, reply_to, to_email, to_name,
                           subject, html, text, headers, message_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?) ON CONFLICT (id) DO NOTHING RETURNING 1
     )
     SELECT ${notify ? 'pg_notify(?, ?)' : '1'} FROM queued`,
    [e.id, e.projectId, e.contactId, ...messageValues(e), ...(notify ? [EMAIL_QUEUED_CHANNEL, e.projectId] : [])],
  );
  return rows.length > 0;
}

/**
 * Records an email that is not sent because its address is suppressed: stored SUPPRESSED (never queued,
 * so no drain sees it) with an `email.suppressed` event saying why, in one statement. A retried caller
 * with a derived id records nothing twice.
 */
export async function recordSuppressedEmail(em: EntityManager, e: QueuedEmailInput, why: SuppressionVerdict): Promise<EventRecord[]> {
  const data = { emailId: e.id, messageId: messageIdOf(e), templateId: e.templateId, campaignId: null, ...why };
  const rows = await sql<ReturnedEvent>(
    em,
    `WITH recorded AS (
       INSERT INTO emails (id, project_id, contact_id, template_id, type, from_email, from_name, reply_to, to_email, to_name,
                           subject, html, text, headers, message_id, status, last_error)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, 'SUPPRESSED', ?) ON CONFLICT (id) DO NOTHING RETURNING project_id, contact_id
     )
     INSERT INTO events (id, project_id, contact_id, name, data, created_at)
     SELECT ?, project_id, contact_id, 'email.suppressed', ?::jsonb, now() FROM recorded WHERE contact_id IS NOT NULL
     RETURNING ${EVENT_RECORD_COLUMNS}`,
    [e.id, e.projectId, e.contactId, ...messageValues(e), suppressedError(why), newId(), JSON.stringify(data)],
  );
  return rows.map(toEventRecord);
}

/** The `last_error` of a suppressed email: why it was not sent. */
export const suppressedError = (why: SuppressionVerdict) => `suppressed: ${why.reason}${why.ruleId ? ` (rule ${why.ruleId})` : ''}`;

/**
 * `count` rows of a VALUES list of parameters: the first as given, whose casts type the columns, the
 * others without them. Rows of values, not arrays: pg would escape each message into an array literal,
 * and PostgreSQL parse it back.
 */
const valueRows = (count: number, first: string) => [first, ...Array<string>(count - 1).fill(first.replace(/::[a-z]+(\[\])?/g, ''))].join(', ');

/** The first row of `queueSends`' VALUES: one parameter per column of `r`, in order, its casts typing them. */
const ROW_PLACEHOLDERS =
  '(?::uuid, ?::uuid, ?::boolean, ?::boolean, ?::jsonb, ?::jsonb, ?::text[], ?::uuid, ?::uuid, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?)';

/** One send's part of a queueing statement (`queueSends`). */
export interface QueuedSend {
  emails: QueuedEmailInput[];
  /** The ids of the recipients who were contacts as the send read them; the others are created with `subscribed` and the data. */
  created: { known: Set<string>; subscribed: boolean; data: Pick<ResolvedData, 'set' | 'unset'> };
  /** Whether to wake the dispatchers by a NOTIFY: false when a drain of this process is told after the commit. */
  notify: boolean;
  /** A drain of this process the emails are claimed for as they are inserted (their first attempt). */
  claimedBy?: string;
  idempotency?: { key: string; response: unknown };
}

/**
 * Queues the emails of one or more sends in a single statement, atomic by itself: the recipients who
 * were not contacts are inserted with their send's `subscribed` and data, the known ones get the send's
 * data merged in by the database (so a concurrent change is not lost), the emails are inserted, each
 * Idempotency-Key is marked done with its answer, and the dispatchers are notified for the sends that
 * ask it. If a recipient was created or deleted by someone else since the read, an email's contact is
 * not there and the foreign key refuses the statement (`isForeignKeyViolation`): nothing is written, for
 * the caller to take the transaction that locks. A contact may appear in one send of a statement only.
 */
export async function queueSends(em: EntityManager, sends: QueuedSend[]): Promise<void> {
  const rows = sends.flatMap((s) => {
    const created = JSON.stringify(applyData({}, s.created.data));
    const set = JSON.stringify(s.created.data.set);
    return s.emails.map((e) => [
      e.projectId,
      e.contactId,
      s.created.known.has(e.contactId!),
      s.created.subscribed,
      created,
      set,
      s.created.data.unset,
      e.id,
      ...messageValues(e),
      s.claimedBy ?? null,
    ]);
  });
  const marks = sends.flatMap((s) => (s.idempotency ? [[s.emails[0].projectId, s.idempotency.key, JSON.stringify(s.idempotency.response)]] : []));
  const notified = [...new Set(sends.filter((s) => s.notify).map((s) => s.emails[0].projectId))];
  await sql(
    em,
    `WITH r (project_id, contact_id, known, subscribed, created_data, data_set, data_unset, email_id, template_id, type,
             from_email, from_name, reply_to, to_email, to_name, subject, html, text, headers, message_id, claimed_by) AS (
       VALUES ${valueRows(rows.length, ROW_PLACEHOLDERS)}
     ), created AS (
       INSERT INTO contacts (id, project_id, email, subscribed, data, created_at, updated_at)
       SELECT contact_id, project_id, to_email, subscribed, created_data, now(), now() FROM r WHERE NOT known
       ON CONFLICT (project_id, email) DO NOTHING
     ), merged AS (
       UPDATE contacts c SET data = (c.data || r.data_set) - r.data_unset, updated_at = now()
       FROM r WHERE r.known AND c.id = r.contact_id AND c.project_id = r.project_id AND c.data IS DISTINCT FROM (c.data || r.data_set) - r.data_unset
     ), queued AS (
       INSERT INTO emails (id, project_id, contact_id, template_id, type, from_email, from_name, reply_to, to_email, to_name,
                           subject, html, text, headers, message_id, claimed_by, claimed_until, attempts)
       SELECT email_id, project_id, contact_id, template_id, type, from_email, from_name, reply_to, to_email, to_name,
              subject, html, text, headers, message_id, claimed_by,
              CASE WHEN claimed_by IS NOT NULL THEN now() + make_interval(secs => ?) END, CASE WHEN claimed_by IS NOT NULL THEN 1 ELSE 0 END
       FROM r
     )${
       marks.length
         ? `, marked AS (
       UPDATE idempotency_keys k SET status_code = 200, response = m.response
       FROM (VALUES ${valueRows(marks.length, '(?::uuid, ?, ?::jsonb)')}) m (project_id, key, response)
       WHERE k.project_id = m.project_id AND k.key = m.key
     )`
         : ''
     }
     SELECT pg_notify(?, p) FROM unnest(?::text[]) p`,
    [...rows.flat(), CLAIM_SECONDS, ...marks.flat(), EMAIL_QUEUED_CHANNEL, notified],
  );
}

/** An email's attachments, in one statement. */
export async function insertAttachments(em: EntityManager, emailId: string, attachments: QueuedAttachment[]): Promise<void> {
  await sql(
    em,
    `INSERT INTO email_attachments (id, email_id, position, filename, content_type, content_id, disposition, content)
     SELECT * FROM unnest(?::uuid[], ?::uuid[], ?::int[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bytea[])`,
    [
      attachments.map(() => newId()),
      attachments.map(() => emailId),
      attachments.map((_, i) => i),
      attachments.map((a) => a.filename),
      attachments.map((a) => a.contentType),
      attachments.map((a) => a.contentId ?? null),
      attachments.map((a) => a.disposition),
      attachments.map((a) => a.content),
    ],
  );
}

/** An attachment decoded and ready to store. */
export interface QueuedAttachment {
  filename: string;
  contentType: string;
  contentId?: string | null;
  disposition: string;
  content: Buffer;
}

/** An email as an activity changed it, with whether this was the first of its kind. */
export interface EmailActivityRow {
  id: string;
  project_id: string;
  contact_id: string | null;
  template_id: string | null;
  campaign_id: string | null;
  message_id: string;
  to_email: string;
  first: boolean;
  /** A click on an email nobody had opened yet also counts as its first open. */
  first_open: boolean;
}

/**
 * Moves an email's status (only up), its first-time stamps and counters for one tracking or provider
 * event, in one statement under the row's lock: events of one email race (a click with its open, a
 * second DSN). `before_*` answers for an email the event no longer changes; nothing for an unknown one.
 */
export async function applyEmailActivity(
  em: EntityManager,
  emailId: string,
  kind: string,
  status: string,
  raisesStatus: boolean,
): Promise<(Partial<EmailActivityRow> & { before_project_id: string; before_contact_id: string }) | undefined> {
  const [found] = await sql<Partial<EmailActivityRow> & { before_project_id: string; before_contact_id: string }>(
    em,
    `WITH before AS (
         SELECT id, project_id, contact_id, status, opened_at, clicked_at, delivered_at, bounced_at, complained_at FROM emails WHERE id = ? FOR UPDATE
       ),
       changed AS (
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
           AND NOT (before.status = 'COMPLAINED' AND ? IN ('bounce', 'complaint'))
           AND NOT (before.status = 'BOUNCED' AND ? = 'bounce')
         RETURNING e.id, e.project_id, e.contact_id, e.template_id, e.campaign_id, e.message_id, e.to_email,
           CASE ? WHEN 'open' THEN before.opened_at IS NULL WHEN 'click' THEN before.clicked_at IS NULL
             WHEN 'delivery' THEN before.delivered_at IS NULL WHEN 'bounce' THEN before.bounced_at IS NULL
             ELSE before.complained_at IS NULL END AS first,
           before.opened_at IS NULL AS first_open
       )
       SELECT before.project_id AS before_project_id, before.contact_id AS before_contact_id, changed.* FROM before LEFT JOIN changed ON true`,
    // A transient bounce is recorded, but does not make the email BOUNCED (`raisesStatus` false).
    [emailId, raisesStatus, status, status, ...Array(7).fill(kind), kind, kind, kind],
  );
  return found;
}

/** Adds one to a campaign's counters for an email's first open, click, bounce...: an increment in place, as events race. */
export async function countFirstActivity(em: EntityManager, campaignId: string, counters: string[]): Promise<void> {
  await sql(em, `UPDATE campaigns SET ${counters.map((c) => `${c} = ${c} + 1`).join(', ')}, updated_at = now() WHERE id = ?`, [campaignId]);
}

/** A contact's latest delivery-related events, newest first, with their bounce type and email. */
export function recentDeliveryEvents(
  em: EntityManager,
  projectId: string,
  contactId: string,
  limit: number,
): Promise<Array<{ name: string; bounce_type: string | null; email_id: string | null }>> {
  return sql<{ name: string; bounce_type: string | null; email_id: string | null }>(
    em,
    `SELECT name, data->>'bounceType' AS bounce_type, data->>'emailId' AS email_id FROM events
     WHERE project_id = ? AND contact_id = ? AND name = ANY(?::text[]) ORDER BY created_at DESC, id DESC LIMIT ?`,
    [projectId, contactId, ['email.bounce', 'email.delivery', 'email.open', 'email.click'], limit],
  );
}

/** A project as a send reads it: billing caps, settings, the sender domain, the recipients who are contacts. */
export type SendingContextRow = BillingRow & {
  settings: unknown;
  domain_id: string | null;
  domain_status: Domain['status'] | null;
  contacts: KnownContact[];
  /** The recipients that are suppressed, with why: an address's list entry first, then its rule. */
  suppressed: Array<SuppressionVerdict & { email: string }>;
};

/**
 * Everything a send must know about its project in one round trip, on /v1/send's hot path: settings,
 * billing caps, the sender domain's status, which recipients are contacts already, and which are suppressed.
 */
export async function sendingContextRow(em: EntityManager, projectId: string, domain: string, recipients: string[]): Promise<SendingContextRow | undefined> {
  const [row] = await sql<SendingContextRow>(
    em,
    `SELECT p.settings, b.email_limit, b.contact_limit, d.id AS domain_id, d.status AS domain_status,
            (SELECT coalesce(json_agg(json_build_object('id', c.id, 'email', c.email, 'subscribed', c.subscribed,
                                                        'snoozed', c.snoozed_until IS NOT NULL, 'data', c.data)), '[]')
             FROM contacts c WHERE c.project_id = p.id AND c.email = ANY(?::text[])) AS contacts,
            ${suppressedAmong('?::text[]', 'p.id')} AS suppressed
     FROM projects p
     LEFT JOIN project_billing b ON b.project_id = p.id
     LEFT JOIN domains d ON d.project_id = p.id AND d.domain = ?
     WHERE p.id = ?`,
    [recipients, recipients, recipients, domain, projectId],
  );
  return row;
}
