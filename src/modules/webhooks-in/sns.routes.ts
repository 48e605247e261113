import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { z } from 'zod';
import { endpoint } from '../../http/endpoint';
import { AppError, badRequest } from '../../http/errors';
import type { SuppressionRules } from '../emails';
import type { ActivityHub } from '../../bus/contact-activity';
import type { SendingJudge } from '../security';
import { recordSesNotification } from './ses-notifications.service';
import type { SnsMessage, SnsVerifier } from './sns-signature';

// Documented only: the handler reads the body itself, as SNS sends it (JSON as text/plain), with its own 400s.
const snsMessage = z.object({
  Type: z.enum(['Notification', 'SubscriptionConfirmation', 'UnsubscribeConfirmation']),
  MessageId: z.string(),
  TopicArn: z.string(),
  Message: z.string().meta({ description: 'For a Notification: the SES event, as JSON text' }),
  Timestamp: z.string(),
  SignatureVersion: z.enum(['1', '2']),
  Signature: z.string(),
  SigningCertURL: z.string(),
  Subject: z.string().optional(),
  SubscribeURL: z.string().optional(),
  Token: z.string().optional(),
});

const snsSpec = {
  tag: 'Webhooks',
  summary: 'Delivery events from Amazon SES, through SNS',
  description: 'Not for clients. Each message’s signature is verified; subscription confirmations are followed only to trusted SNS hosts.',
  internal: true,
  body: snsMessage,
  bodyContentTypes: ['text/plain', 'application/json'],
  responses: {
    200: z.object({ result: z.string().optional(), confirmed: z.boolean().optional(), ignored: z.string().optional() }).describe('What became of the message'),
  },
  errors: { 400: 'Not an SNS message (INVALID_JSON, INVALID_SNS_MESSAGE)', 403: 'A bad signature, or an untrusted SubscribeURL', 422: null },
};

/**
 * SES events (Delivery, Bounce, Complaint, Open, Click) arriving through Amazon SNS. Every message
 * must carry a valid SNS signature; subscriptions are confirmed only for trusted hosts; a notification
 * is processed once (its MessageId is recorded in the same transaction). Once the signature is good the
 * answer is 200 even when processing fails, which is logged: SNS retrying would not fix it.
 */
export function snsRoutes(
  router: Router,
  deps: { verifier: SnsVerifier; textBody: Middleware; hub: ActivityHub; judge: SendingJudge; rules: SuppressionRules; topics?: string[] },
): void {
  router.post(
    '/webhooks/sns',
    deps.textBody,
    endpoint(snsSpec, async (ctx) => {
      const raw = ctx.request.body;
      let message: SnsMessage;
      try {
        message = (typeof raw === 'string' ? JSON.parse(raw) : raw) as SnsMessage;
      } catch {
        throw badRequest('Body is not an SNS message', 'INVALID_JSON');
      }
      if (!message || typeof message !== 'object' || !message.Type) throw badRequest('Body is not an SNS message', 'INVALID_SNS_MESSAGE');
      if (!(await deps.verifier.verify(message))) throw new AppError(403, 'INVALID_SIGNATURE', 'SNS signature verification failed');
      // Any AWS account can have SNS sign a message from its own topic; only the operator's topics count.
      // 200, so SNS does not retry what will never be accepted.
      if (deps.topics && !deps.topics.includes(message.TopicArn)) {
        ctx.state.log.warn({ topic: message.TopicArn, type: message.Type }, 'SNS message from a topic not in SNS_TOPIC_ARNS; ignored');
        ctx.body = { ignored: 'topic' };
        return;
      }

      if (message.Type === 'SubscriptionConfirmation') {
        if (!message.SubscribeURL || !deps.verifier.trusts(message.SubscribeURL)) {
          throw new AppError(403, 'UNTRUSTED_SUBSCRIPTION', 'Subscription confirmations are accepted only from trusted SNS hosts');
        }
        const res = await fetch(message.SubscribeURL, { redirect: 'error', signal: AbortSignal.timeout(10_000) });
        ctx.state.log.info({ topic: message.TopicArn, status: res.status }, 'confirmed SNS subscription');
        ctx.body = { confirmed: res.ok };
        return;
      }
      if (message.Type !== 'Notification') {
        ctx.body = { ignored: message.Type };
        return;
      }
      try {
        const outcome = await recordSesNotification(ctx.state.em, message, deps.rules);
        if (typeof outcome === 'string') {
          ctx.body = { result: outcome };
        } else {
          const r = outcome.recorded;
          deps.hub.publish({ projectId: r.projectId, contactIds: [r.contactId], events: r.events });
          // Judged after the commit, so this bounce or complaint is in the rates.
          if (outcome.judge) await deps.judge.judge(r.projectId);
          ctx.body = { result: outcome.result };
        }
      } catch (err) {
        ctx.state.log.error({ err, messageId: message.MessageId }, 'could not process an SNS notification');
        ctx.body = { result: 'error' };
      }
    }),
  );
}
