import type Router from '@koa/router';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import type { Links } from '../../mail/links';
import type { ActivityHub } from '../../bus/contact-activity';
import { sendResponse, sendSchema } from './emails.schemas';
import { type LocalEmailQueue, type SendBatcher, type SendLimits, sendEmails } from './emails.service';

export function emailRoutes(
  router: Router,
  g: Guards,
  deps: { links: Links; limits: SendLimits; queue?: LocalEmailQueue; batcher?: SendBatcher; hub: ActivityHub },
): void {
  router.post(
    '/v1/send',
    g.secret,
    g.idempotent,
    endpoint(
      {
        tag: 'Emails',
        summary: 'Send a transactional email',
        description: 'Sending is immediate. Give `template`, or both `subject` and `body`; each recipient gets its own contact upsert and rendered email.',
        body: sendSchema,
        responses: { 200: sendResponse.describe('One email record per recipient') },
        errors: { 403: 'The project is disabled, or the sender domain is not verified', 404: 'The template is not in the project' },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const result = await sendEmails(ctx.state.em, projectId, input.body(), deps, ctx.state.idempotency);
        deps.hub.publish({ projectId, contactIds: result.emails.map((e) => e.contact.id), events: result.events });
        ctx.body = { success: true, data: { emails: result.emails, timestamp: result.timestamp } };
      },
    ),
  );
}
