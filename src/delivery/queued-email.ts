import type { DraftMessage } from '../mail/compose';
import type { SuppressionVerdict } from './delivery-ports';

export interface QueuedEmail {
  id: string;
  project_id: string;
  contact_id: string | null;
  template_id: string | null;
  campaign_id: string | null;
  from_email: string;
  from_name: string | null;
  reply_to: string | null;
  to_email: string;
  to_name: string | null;
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  message_id: string;
  /** The A/B test variant of a campaign email, whose subject and body it is rendered from. */
  variant_id?: string | null;
  attempts: number;
  /** Why its address is suppressed, as the claim or the chunk's read found it (null: it is not); unset for mail handed over, which its send checked. */
  suppression?: SuppressionVerdict | null;
}

export interface Attachment {
  email_id: string;
  filename: string;
  content_type: string;
  content_id: string | null;
  disposition: 'attachment' | 'inline';
  content: Buffer;
}

/** What delivery reads of a queued email (`QueuedEmail` but its `attempts`), from `emails e`. */
export const QUEUED_COLUMNS = `e.id, e.project_id, e.contact_id, e.template_id, e.campaign_id, e.from_email, e.from_name, e.reply_to,
       e.to_email, e.to_name, e.subject, e.html, e.text, e.headers, e.message_id, e.variant_id`;

/** `<project id>:<sender domain>`: whose DKIM key signs this email. */
export const senderOf = (e: QueuedEmail) => `${e.project_id}:${e.from_email.slice(e.from_email.lastIndexOf('@') + 1)}`;

/** Recipients of a campaign by contact id: after `after` (null: from the first), up to and with `upTo`. */
export interface CampaignChunk {
  after: string | null;
  upTo: string;
}

export interface DrainReport {
  sent: number;
  retried: number;
  failed: number;
}

/** Thrown when the SMTP server cannot be reached: the drain activity fails and Temporal retries it with backoff. */
export class SmtpUnavailableError extends Error {}

/**
 * A claim's lifetime when its owner never comes back to take it (its execution was terminated): the
 * normal takeover after a crash is the owner's retried activity, one heartbeat timeout (20 s) later.
 */
export const CLAIM_SECONDS = 120;

/** A campaign recipient's message, rendered by whoever encodes it. */
export type Draft = DraftMessage['compose'];
