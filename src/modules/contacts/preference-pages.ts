import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { isUuid } from '../../db/ids';
import { sql } from '../../db/orm';
import { queryValue } from '../../http/validate';
import type { Links } from '../../mail/links';
import { escapeHtml } from '../../mail/render';
import type { ActivityHub } from '../events/contact-activity';
import { updateContactSubscription } from './contacts.service';

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
button{font-size:1rem;padding:.6rem 1.2rem;border-radius:.4rem;border:1px solid #888;background:#f4f4f4;cursor:pointer}</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}

interface PageContact {
  id: string;
  project_id: string;
  email: string;
  subscribed: boolean;
}

async function contactOf(ctx: Context, links: Links): Promise<PageContact | undefined> {
  const id = String(ctx.params.contactId);
  if (!isUuid(id) || !links.verifyContact(id, queryValue(ctx, 'token'))) return undefined;
  const [row] = await sql<PageContact>(ctx.state.em, `SELECT id, project_id, email, subscribed FROM contacts WHERE id = ?`, [id]);
  return row;
}

function invalid(ctx: Context): void {
  ctx.status = 404;
  ctx.type = 'text/html';
  ctx.body = page('Link not valid', '<p>This link is not valid, or the address was removed.</p>');
}

const form = (action: string, label: string) =>
  `<form method="post" action="${escapeHtml(action)}"><button type="submit">${escapeHtml(label)}</button></form>`;

/**
 * The pages behind `unsubscribeUrl`, `subscribeUrl` and `manageUrl`. GET shows the page (so link
 * scanners change nothing); POST acts. A POST to the unsubscribe URL is also the RFC 8058 one-click
 * path (`List-Unsubscribe=One-Click`). Never rate limited: they carry no API key.
 */
export function preferencePageRoutes(router: Router, deps: { links: Links; formBody: Middleware; hub: ActivityHub }): void {
  const setSubscribed = async (ctx: Context, contact: PageContact, subscribed: boolean, reason: string) => {
    const events = await ctx.state.em.transactional((tx) => updateContactSubscription(tx, contact.id, subscribed, { reason }));
    deps.hub.publish({ projectId: contact.project_id, contactIds: [contact.id], events });
  };
  const self = (ctx: Context) => `${ctx.path}?token=${encodeURIComponent(queryValue(ctx, 'token') ?? '')}`;

  router.get('/unsubscribe/:contactId', async (ctx) => {
    const c = await contactOf(ctx, deps.links);
    if (!c) return invalid(ctx);
    ctx.type = 'text/html';
    ctx.body = c.subscribed
      ? page('Unsubscribe', `<p>Stop sending email to <b>${escapeHtml(c.email)}</b>?</p>${form(self(ctx), 'Unsubscribe')}`)
      : page('Unsubscribed', `<p><b>${escapeHtml(c.email)}</b> is unsubscribed.</p>`);
  });

  router.post('/unsubscribe/:contactId', deps.formBody, async (ctx) => {
    const c = await contactOf(ctx, deps.links);
    if (!c) return invalid(ctx);
    const oneClick = (ctx.request.body as Record<string, unknown> | undefined)?.['List-Unsubscribe'] === 'One-Click';
    await setSubscribed(ctx, c, false, oneClick ? 'one_click' : 'unsubscribe_link');
    ctx.type = 'text/html';
    ctx.body = page('Unsubscribed', `<p><b>${escapeHtml(c.email)}</b> will receive no more marketing email.</p>${form(self(ctx).replace('/unsubscribe/', '/subscribe/'), 'Subscribe again')}`);
  });

  router.get('/subscribe/:contactId', async (ctx) => {
    const c = await contactOf(ctx, deps.links);
    if (!c) return invalid(ctx);
    ctx.type = 'text/html';
    ctx.body = c.subscribed
      ? page('Subscribed', `<p><b>${escapeHtml(c.email)}</b> is subscribed.</p>`)
      : page('Subscribe', `<p>Send email to <b>${escapeHtml(c.email)}</b> again?</p>${form(self(ctx), 'Subscribe')}`);
  });

  router.post('/subscribe/:contactId', deps.formBody, async (ctx) => {
    const c = await contactOf(ctx, deps.links);
    if (!c) return invalid(ctx);
    await setSubscribed(ctx, c, true, 'subscribe_link');
    ctx.type = 'text/html';
    ctx.body = page('Subscribed', `<p><b>${escapeHtml(c.email)}</b> is subscribed again.</p>`);
  });

  router.get('/manage/:contactId', async (ctx) => {
    const c = await contactOf(ctx, deps.links);
    if (!c) return invalid(ctx);
    const token = encodeURIComponent(queryValue(ctx, 'token') ?? '');
    ctx.type = 'text/html';
    ctx.body = page(
      'Email preferences',
      `<p><b>${escapeHtml(c.email)}</b> is ${c.subscribed ? 'subscribed' : 'unsubscribed'}.</p>` +
        (c.subscribed ? form(`/unsubscribe/${c.id}?token=${token}`, 'Unsubscribe') : form(`/subscribe/${c.id}?token=${token}`, 'Subscribe')),
    );
  });
}
