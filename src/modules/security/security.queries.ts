import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

// The security module's hand-written SQL: each statement says why the EntityManager does not make it.

/**
 * SQL, an aggregate over two other modules' tables: the permanent bounces recorded since `since` of
 * mail sent since then, each event matched to its email by the id in its data.
 */
export async function lateReportsSince(em: EntityManager, projectId: string, since: Date): Promise<{ bounced: number }> {
  const [row] = await sql<{ bounced: string }>(
    em,
    `SELECT count(*) AS bounced
     FROM events e JOIN emails m ON m.id = (e.data->>'emailId')::uuid
     WHERE e.project_id = ? AND e.name = 'email.bounce' AND e.data->>'bounceType' = 'Permanent' AND e.created_at >= ? AND m.sent_at >= ?`,
    [projectId, since, since],
  );
  return { bounced: Number(row.bounced) };
}

/**
 * SQL, over two other modules' tables: the complaints since `since` that count toward a suspension,
 * and how many recipient domains they came from. Left out: complaints the MX could not authenticate
 * (`authenticated: false` in their data; SES's are authenticated by SNS) and complaints about
 * confirmation mails (anyone can have one sent to an address of theirs). `sentSince`: only of mail sent since then.
 */
export async function countedComplaintsSince(
  em: EntityManager,
  projectId: string,
  since: Date,
  sentSince: Date | null,
): Promise<{ complained: number; domains: number }> {
  const [row] = await sql<{ complained: string; domains: string }>(
    em,
    `SELECT count(*) AS complained, count(DISTINCT lower(split_part(m.to_email, '@', 2))) AS domains
     FROM events e JOIN emails m ON m.id = (e.data->>'emailId')::uuid
     WHERE e.project_id = ? AND e.name = 'email.complaint' AND e.created_at >= ?
       AND (e.data->>'authenticated') IS DISTINCT FROM 'false'
       AND NOT EXISTS (SELECT 1 FROM consent_confirmations c WHERE c.email_id = m.id)
       AND (?::timestamptz IS NULL OR m.sent_at >= ?::timestamptz)`,
    [projectId, since, sentSince, sentSince],
  );
  return { complained: Number(row.complained), domains: Number(row.domains) };
}

/**
 * SQL, over three other modules' tables: permanent bounces recorded since `since` of confirmation mails
 * mailed since `mailedSince`. Anyone can have confirmation mails sent to addresses of theirs and forge
 * their bounces, so these are taken out of the bounce rate.
 */
export async function confirmationBouncesSince(em: EntityManager, projectId: string, since: Date, mailedSince: Date): Promise<number> {
  const [row] = await sql<{ bounced: string }>(
    em,
    `SELECT count(*) AS bounced
     FROM consent_confirmations c
     JOIN events e ON e.project_id = c.project_id AND e.contact_id = c.contact_id AND e.name = 'email.bounce' AND e.created_at >= ?
       AND e.data->>'emailId' = c.email_id::text AND e.data->>'bounceType' = 'Permanent'
     WHERE c.project_id = ? AND c.mailed_at >= ? AND c.email_id IS NOT NULL`,
    [since, projectId, mailedSince],
  );
  return Number(row.bounced);
}
