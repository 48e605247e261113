import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { ActivityHub } from '../../bus/contact-activity';
import { AppError, badRequest } from '../../errors';
import type { SuppressionRules } from '../emails';
import type { SendingJudge } from '../security';
import { recordSesNotification } from './ses-notifications.service';
import type { SnsMessage, SnsVerifier } from './sns-signature';

export interface SnsDeps {
  verifier: SnsVerifier;
  hub: ActivityHub;
  judge: SendingJudge;
  rules: SuppressionRules;
  /** SNS_TOPIC_ARNS: the only topics whose messages count; unset, any topic. */
  topics?: string[];
}

/** What became of an SNS message, as `POST /webhooks/sns` answers it. */
export type SnsAnswer = { result: string } | { confirmed: boolean } | { ignored: string };

function parse(body: unknown): SnsMessage {
  let message: SnsMessage;
  try {
    message = (typeof body === 'string' ? JSON.parse(body) : body) as SnsMessage;
  } catch {
    throw badRequest('Body is not an SNS message', 'INVALID_JSON');
  }
  if (!message || typeof message !== 'object' || !message.Type) throw badRequest('Body is not an SNS message', 'INVALID_SNS_MESSAGE');
  return message;
}

/**
 * Takes one message SNS posted (as text or parsed JSON): its signature verified, a subscription
 * confirmed only to a trusted host, a notification recorded once and published. Once the signature
 * is good a failed notification is logged and answered `{ result: 'error' }`: SNS retrying would not fix it.
 */
export async function receiveSnsMessage(em: EntityManager, deps: SnsDeps, log: Logger, body: unknown): Promise<SnsAnswer> {
  const message = parse(body);
  if (!(await deps.verifier.verify(message))) throw new AppError(403, 'INVALID_SIGNATURE', 'SNS signature verification failed');
  // Any AWS account can have SNS sign a message from its own topic; only the operator's topics count.
  // Answered 200, so SNS does not retry what will never be accepted.
  if (deps.topics && !deps.topics.includes(message.TopicArn)) {
    log.warn({ topic: message.TopicArn, type: message.Type }, 'SNS message from a topic not in SNS_TOPIC_ARNS; ignored');
    return { ignored: 'topic' };
  }

  if (message.Type === 'SubscriptionConfirmation') {
    if (!message.SubscribeURL || !deps.verifier.trusts(message.SubscribeURL)) {
      throw new AppError(403, 'UNTRUSTED_SUBSCRIPTION', 'Subscription confirmations are accepted only from trusted SNS hosts');
    }
    const res = await fetch(message.SubscribeURL, { redirect: 'error', signal: AbortSignal.timeout(10_000) });
    log.info({ topic: message.TopicArn, status: res.status }, 'confirmed SNS subscription');
    return { confirmed: res.ok };
  }
  if (message.Type !== 'Notification') return { ignored: message.Type };
  try {
    const outcome = await recordSesNotification(em, message, deps.rules);
    if (typeof outcome === 'string') return { result: outcome };
    const r = outcome.recorded;
    if (r.contactId) deps.hub.publish({ projectId: r.projectId, contactIds: [r.contactId], events: r.events });
    // Judged after the commit, so this bounce or complaint is in the rates.
    if (outcome.judge) await deps.judge.judge(r.projectId);
    return { result: outcome.result };
  } catch (err) {
    log.error({ err, messageId: message.MessageId }, 'could not process an SNS notification');
    return { result: 'error' };
  }
}
