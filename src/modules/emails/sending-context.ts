import type { EntityManager } from '@mikro-orm/postgresql';
import { type ProjectSettings, withDefaults } from '../accounts';
import { type BillingLimits, limitsOf } from '../billing';
import { refuseUnverifiedSender, senderDomainOf } from '../domains';
import type { SuppressionVerdict } from '../suppressions';
import { sendingContextRow } from './emails.queries';

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
  /** The recipients asked about whose mail is suppressed, by email, with why. */
  suppressed: Map<string, SuppressionVerdict>;
}

/**
 * What queueing mail from `fromEmail` needs to know about its project, in one statement: the sender
 * domain must be registered and verified (403 otherwise), the settings shape the message, the billing
 * caps say whether the send must count usage, which of `recipients` are contacts already, and which are suppressed.
 */
export async function sendingContext(em: EntityManager, projectId: string, fromEmail: string, recipients: string[] = []): Promise<SendingContext> {
  const domain = senderDomainOf(fromEmail);
  const row = await sendingContextRow(em, projectId, domain, recipients);
  refuseUnverifiedSender(domain, row?.domain_id ? { id: row.domain_id, status: row.domain_status! } : undefined);
  return {
    settings: withDefaults(row?.settings),
    limits: limitsOf(row),
    contacts: new Map((row?.contacts ?? []).map((c) => [c.email, c])),
    suppressed: firstVerdicts(row?.suppressed ?? []),
  };
}

/** Each address's first verdict: the list's entry wins over a rule. */
function firstVerdicts(rows: Array<SuppressionVerdict & { email: string }>): Map<string, SuppressionVerdict> {
  const verdicts = new Map<string, SuppressionVerdict>();
  for (const { email, ...why } of rows) if (!verdicts.has(email)) verdicts.set(email, why);
  return verdicts;
}
