import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { type ProjectSettings, withDefaults } from '../accounts';
import { type BillingLimits, type BillingRow, limitsOf } from '../billing';
import { type Domain, refuseUnverifiedSender, senderDomainOf } from '../domains';

/** A recipient who is a contact already, as the send found them. */
export interface KnownContact {
  id: string;
  email: string;
  subscribed: boolean;
  snoozed: boolean;
  data: Record<string, unknown>;
}

export interface SendingContext {
  settings: ProjectSettings;
  /** For `assertWithinBillingLimits(..., known)`: without caps, the send's transaction reads nothing more. */
  limits: BillingLimits;
  /** The recipients asked about who are contacts already, by email. */
  contacts: Map<string, KnownContact>;
}

/**
 * What queueing mail from `fromEmail` needs to know about its project, in one statement: the sender
 * domain must be registered and verified (403 otherwise), the settings shape the message, the billing
 * caps say whether the send must count usage, and which of `recipients` are contacts already.
 */
export async function sendingContext(em: EntityManager, projectId: string, fromEmail: string, recipients: string[] = []): Promise<SendingContext> {
  const domain = senderDomainOf(fromEmail);
  const [row] = await sql<BillingRow & { settings: unknown; domain_id: string | null; domain_status: Domain['status'] | null; contacts: KnownContact[] }>(
    em,
    `SELECT p.settings, b.email_limit, b.contact_limit, d.id AS domain_id, d.status AS domain_status,
            (SELECT coalesce(json_agg(json_build_object('id', c.id, 'email', c.email, 'subscribed', c.subscribed,
                                                        'snoozed', c.snoozed_until IS NOT NULL, 'data', c.data)), '[]')
             FROM contacts c WHERE c.project_id = p.id AND c.email = ANY(?::text[])) AS contacts
     FROM projects p
     LEFT JOIN project_billing b ON b.project_id = p.id
     LEFT JOIN domains d ON d.project_id = p.id AND d.domain = ?
     WHERE p.id = ?`,
    [recipients, domain, projectId],
  );
  refuseUnverifiedSender(domain, row?.domain_id ? { id: row.domain_id, status: row.domain_status! } : undefined);
  return { settings: withDefaults(row?.settings), limits: limitsOf(row), contacts: new Map((row?.contacts ?? []).map((c) => [c.email, c])) };
}
