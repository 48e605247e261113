import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { z } from 'zod';
import { endpoint } from '../../http/endpoint';
import { receiveSnsMessage, type SnsDeps } from './sns-messages.service';

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
export function snsRoutes(router: Router, deps: SnsDeps & { textBody: Middleware }): void {
  router.post(
    '/webhooks/sns',
    deps.textBody,
    endpoint(snsSpec, async (ctx) => {
      ctx.body = await receiveSnsMessage(ctx.state.em, deps, ctx.state.log, ctx.request.body);
    }),
  );
}
