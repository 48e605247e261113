import { type EntityManager, raw } from '@mikro-orm/postgresql';
import { transaction } from '../../db/orm';
import { Email, type EmailActivity, recordEmailActivity, type RecordedActivity, type SuppressionRules } from '../emails';
import { SnsNotification } from './sns-notifications.entity';
import type { SnsMessage } from './sns-signature';

interface SesEvent {
  notificationType?: string;
  eventType?: string;
  mail?: { messageId?: string; commonHeaders?: { messageId?: string }; headers?: Array<{ name: string; value: string }> };
  bounce?: { bounceType?: string; bounceSubType?: string; reportingMTA?: string };
  complaint?: { complaintFeedbackType?: string; userAgent?: string };
  click?: { link?: string };
}

const defined = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => typeof v === 'string' && v));

function activityOf(e: SesEvent): EmailActivity | undefined {
  switch (e.eventType ?? e.notificationType) {
    case 'Delivery':
      return { kind: 'delivery' };
    case 'Open':
      return { kind: 'open' };
    case 'Click':
      return { kind: 'click', link: e.click?.link ?? '' };
    case 'Complaint':
      return {
        kind: 'complaint',
        details: defined({ complaintFeedbackType: e.complaint?.complaintFeedbackType, userAgent: e.complaint?.userAgent, source: 'ses' }),
      };
    case 'Bounce': {
      const t = e.bounce?.bounceType;
      const details = defined({ bounceSubType: e.bounce?.bounceSubType, reportingMta: e.bounce?.reportingMTA, source: 'ses' });
      return { kind: 'bounce', bounceType: t === 'Permanent' || t === 'Transient' ? t : 'Undetermined', details };
    }
    default:
      return undefined;
  }
}

/** The email an SES event is about: by the provider's message id, else by our own Message-ID header. */
async function findEmail(em: EntityManager, e: SesEvent): Promise<string | undefined> {
  const ours = e.mail?.commonHeaders?.messageId ?? e.mail?.headers?.find((h) => h.name.toLowerCase() === 'message-id')?.value;
  const provider = e.mail?.messageId ?? '';
  const row = await em
    .createQueryBuilder(Email)
    .select('id')
    .where({ $or: [{ providerMessageId: provider }, { messageId: ours ?? '' }] })
    .orderBy({ [raw('provider_message_id = ?', [provider])]: 'desc' })
    .limit(1)
    .execute('get');
  return row?.id;
}

/** What became of a notification: recorded (and whether to judge the project's rates), or why not. */
export type SesOutcome = 'duplicate' | 'ignored' | 'unknown_email' | { result: 'recorded'; recorded: RecordedActivity; judge: boolean };

/**
 * Records an SES event delivered by SNS once (by its MessageId), in one transaction with what it
 * records about the email (delivery, open, click, bounce, complaint).
 */
export async function recordSesNotification(em: EntityManager, message: SnsMessage, rules: SuppressionRules): Promise<SesOutcome> {
  return transaction(em, async (tx) => {
    const fresh = await tx.createQueryBuilder(SnsNotification).insert({ messageId: message.MessageId }).onConflict('messageId').ignore().execute('run');
    if (!fresh.affectedRows) return 'duplicate';
    const event = JSON.parse(message.Message) as SesEvent;
    const activity = activityOf(event);
    if (!activity) return 'ignored';
    const emailId = await findEmail(tx, event);
    if (!emailId) return 'unknown_email';
    const recorded = await recordEmailActivity(tx, emailId, activity, rules);
    return recorded ? ({ result: 'recorded', recorded, judge: activity.kind === 'bounce' || activity.kind === 'complaint' } as const) : 'unknown_email';
  });
}
