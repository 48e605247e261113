import type Router from '@koa/router';
import type { Guards } from '../../http/guards';
import { body } from '../../http/validate';
import type { Links } from '../../mail/links';
import { sendSchema } from './emails.schemas';
import { type SendLimits, sendEmails } from './emails.service';

export function emailRoutes(router: Router, g: Guards, deps: { links: Links; limits: SendLimits }): void {
  router.post('/v1/send', g.secret, g.idempotent, async (ctx) => {
    const input = body(ctx, sendSchema);
    const result = await sendEmails(ctx.state.em, ctx.state.project!.id, input, deps);
    ctx.body = { success: true, data: { emails: result.emails, timestamp: result.timestamp } };
  });
}
