import type Router from '@koa/router';
import type { Guards } from '../../http/guards';
import { body } from '../../http/validate';
import type { Links } from '../../mail/links';
import type { ActivityHub } from '../events/contact-activity';
import { sendSchema } from './emails.schemas';
import { type SendLimits, sendEmails } from './emails.service';

export function emailRoutes(router: Router, g: Guards, deps: { links: Links; limits: SendLimits; hub: ActivityHub }): void {
  router.post('/v1/send', g.secret, g.idempotent, async (ctx) => {
    const input = body(ctx, sendSchema);
    const projectId = ctx.state.project!.id;
    const result = await sendEmails(ctx.state.em, projectId, input, deps);
    deps.hub.publish({ projectId, contactIds: result.emails.map((e) => e.contact.id), events: result.events });
    ctx.body = { success: true, data: { emails: result.emails, timestamp: result.timestamp } };
  });
}
