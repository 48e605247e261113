import type Router from '@koa/router';
import type { Context } from 'koa';
import { z } from 'zod';
import { isUuid } from '../../db/ids';
import { content, endpoint } from '../../http/endpoint';
import type { Links } from '../../mail/links';
import type { ActivityHub } from '../../bus/contact-activity';
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
      if (recorded?.contactId) deps.hub.publish({ projectId: recorded.projectId, contactIds: [recorded.contactId], events: recorded.events });
    } catch (err) {
      ctx.state.log.error({ err, emailId }, `could not record ${activity.kind}`);
    }
  };

  // Their inputs never fail validation: a bad link still gets the pixel, or a page saying it is not valid.
  const emailId = z.string().meta({ description: 'The email record id' });

  router.get(
    '/t/o/:emailId/:file',
    endpoint(
      {
        tag: 'Tracking',
        summary: 'Open-tracking pixel (in sent mail)',
        internal: true,
        description: 'Always answers the pixel; counts an open only when the signature is valid.',
        params: { emailId, file: z.string().meta({ description: '<signature>.gif' }) },
        responses: { 200: content('image/gif', 'A transparent 1×1 GIF') },
      },
      async (ctx, input) => {
        const id = input.param('emailId');
        const token = input.param('file').replace(/\.gif$/, '');
        if (isUuid(id) && deps.links.verifyOpen(id, token)) {
          await record(ctx, id, { kind: 'open' });
        }
        ctx.set('Cache-Control', 'no-store, max-age=0');
        ctx.type = 'image/gif';
        ctx.body = PIXEL;
      },
    ),
  );

  router.get(
    '/t/c/:emailId/:token',
    endpoint(
      {
        tag: 'Tracking',
        summary: 'Click-tracking redirect (in sent mail)',
        internal: true,
        description: 'Redirects only to the destination its signature covers, so it is never an open redirect.',
        params: { emailId, token: z.string().meta({ description: 'The signature of the email id and destination' }) },
        query: z.object({ u: z.string().optional().meta({ description: 'The destination, an http(s) URL' }) }),
        responses: { 302: content('', 'To the destination'), 400: content('text/html', 'The link is not valid') },
      },
      async (ctx, input) => {
        const id = input.param('emailId');
        const url = input.query().u ?? '';
        if (!isUuid(id) || !/^https?:\/\//i.test(url) || !deps.links.verifyClick(id, url, input.param('token'))) {
          ctx.status = 400;
          ctx.type = 'text/html';
          ctx.body = '<!doctype html><title>Invalid link</title><p>This link is not valid.</p>';
          return;
        }
        await record(ctx, id, { kind: 'click', link: url });
        ctx.set('Cache-Control', 'no-store, max-age=0');
        ctx.redirect(url);
      },
    ),
  );
}
