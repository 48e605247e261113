import type Router from '@koa/router';
import type { Context } from 'koa';
import { isUuid } from '../../db/ids';
import { queryValue } from '../../http/validate';
import type { Links } from '../../mail/links';
import type { ActivityHub } from '../events/contact-activity';
import { type EmailActivity, recordEmailActivity } from './email-activity';

// The smallest transparent GIF.
const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

/**
 * Open and click tracking without any provider. The pixel always answers (a broken image helps no one)
 * but counts only with a valid signature; a click redirects only to the destination its signature
 * covers, so these links can never be used as an open redirect.
 */
export function trackingRoutes(router: Router, deps: { links: Links; hub: ActivityHub }): void {
  const record = async (ctx: Context, emailId: string, activity: EmailActivity) => {
    try {
      const recorded = await recordEmailActivity(ctx.state.em, emailId, activity);
      if (recorded) deps.hub.publish({ projectId: recorded.projectId, contactIds: [recorded.contactId], events: recorded.events });
    } catch (err) {
      ctx.state.log.error({ err, emailId }, `could not record ${activity.kind}`);
    }
  };

  router.get('/t/o/:emailId/:file', async (ctx: Context) => {
    const emailId = String(ctx.params.emailId);
    const token = String(ctx.params.file).replace(/\.gif$/, '');
    if (isUuid(emailId) && deps.links.verifyOpen(emailId, token)) {
      await record(ctx, emailId, { kind: 'open' });
    }
    ctx.set('Cache-Control', 'no-store, max-age=0');
    ctx.type = 'image/gif';
    ctx.body = PIXEL;
  });

  router.get('/t/c/:emailId/:token', async (ctx: Context) => {
    const emailId = String(ctx.params.emailId);
    const url = queryValue(ctx, 'u') ?? '';
    if (!isUuid(emailId) || !/^https?:\/\//i.test(url) || !deps.links.verifyClick(emailId, url, String(ctx.params.token))) {
      ctx.status = 400;
      ctx.type = 'text/html';
      ctx.body = '<!doctype html><title>Invalid link</title><p>This link is not valid.</p>';
      return;
    }
    await record(ctx, emailId, { kind: 'click', link: url });
    ctx.set('Cache-Control', 'no-store, max-age=0');
    ctx.redirect(url);
  });
}
