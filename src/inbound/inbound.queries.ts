import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/orm';

/**
 * The MX's statements. Each report is remembered with `ON CONFLICT DO NOTHING` on (report key, email),
 * so the same report delivered twice (a retrying relay, two MX hosts) is recorded once: the guard and the
 * write must be one statement.
 */

/** An email as the inbound path needs it. */
export interface EmailRef {
  id: string;
  project_id: string;
  contact_id: string;
  to_email: string;
  message_id: string;
  campaign_id: string | null;
  template_id: string | null;
}

/** A report as the log of reports keeps it. */
export interface LoggedReport {
  id: string;
  key: string;
  kind: string;
  from: string | null;
  to: string;
  detail: string;
}

const EMAIL_COLUMNS = `id, project_id, contact_id, to_email, message_id, campaign_id, template_id`;

/** The email `emailId` names, with the report remembered for it in the same statement; `fresh` false when it already was. */
export async function rememberReportFor(em: EntityManager, emailId: string, r: LoggedReport): Promise<(EmailRef & { fresh: boolean }) | undefined> {
  const [row] = await sql<EmailRef & { fresh: boolean }>(
    em,
    `WITH e AS (SELECT ${EMAIL_COLUMNS} FROM emails WHERE id = ?),
     ins AS (
       INSERT INTO inbound_reports (id, report_key, email_id, project_id, kind, envelope_from, envelope_to, detail)
       SELECT ?, ?, e.id, e.project_id, ?, ?, ?, ?::jsonb FROM e
       ON CONFLICT (report_key, email_id) DO NOTHING RETURNING 1
     )
     SELECT e.*, EXISTS (SELECT 1 FROM ins) AS fresh FROM e`,
    [emailId, r.id, r.key, r.kind, r.from, r.to, r.detail],
  );
  return row;
}

/** The email whose Message-ID a feedback-loop report quotes, if it was sent from `senderDomain` (lower-case). */
export async function emailByMessageId(em: EntityManager, messageId: string, senderDomain: string): Promise<EmailRef | undefined> {
  const [email] = await sql<EmailRef>(
    em,
    `SELECT ${EMAIL_COLUMNS} FROM emails WHERE message_id = ? AND lower(substring(from_email from '@([^@]*)$')) = ? LIMIT 1`,
    [messageId, senderDomain],
  );
  return email;
}

/** Remembers a report for an email (or for none); false when it already was. */
export async function rememberReport(em: EntityManager, email: EmailRef | undefined, r: LoggedReport): Promise<boolean> {
  const rows = await sql(
    em,
    `INSERT INTO inbound_reports (id, report_key, email_id, project_id, kind, envelope_from, envelope_to, detail)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?::jsonb) ON CONFLICT (report_key, email_id) DO NOTHING RETURNING 1`,
    [r.id, r.key, email?.id ?? null, email?.project_id ?? null, r.kind, r.from, r.to, r.detail],
  );
  return rows.length > 0;
}

/** The address an email went to, for deciding who may vouch for a complaint about it. */
export async function emailRecipient(em: EntityManager, emailId: string): Promise<string | undefined> {
  const [row] = await sql<{ to_email: string }>(em, `SELECT to_email FROM emails WHERE id = ?`, [emailId]);
  return row?.to_email;
}

/** Whether some project has verified `domain` (lower-case): only such a domain has a feedback-loop address. */
export async function isVerifiedDomain(em: EntityManager, domain: string): Promise<boolean> {
  const rows = await sql(em, `SELECT 1 FROM domains WHERE lower(domain) = ? AND status = 'verified' LIMIT 1`, [domain]);
  return rows.length > 0;
}
