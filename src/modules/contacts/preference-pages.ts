import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { z } from 'zod';
import { isUuid } from '../../db/ids';
import { transaction } from '../../db/orm';
import { content, endpoint } from '../../http/endpoint';
import type { Links } from '../../mail/links';
import { escapeHtml } from '../../mail/render';
import type { ActivityHub } from '../../bus/contact-activity';
import { Contact } from './contacts.entity';
import { updateContactSubscription } from './contacts.service';
import { setContactTopics, Topic, topicStatesOf } from '../topics';

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
button{font-size:1rem;padding:.6rem 1.2rem;border-radius:.4rem;border:1px solid #888;background:#f4f4f4;cursor:pointer}</style></head>
<body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
}

/** A page link: the contact's id in the path and its signature in `token`; a topic's unsubscribe link also names the topic, signed with it. */
interface Link {
  id: string;
  token?: string;
  topic?: string;
}

async function contactOf(ctx: Context, links: Links, link: Link): Promise<Contact | undefined> {
  if (!isUuid(link.id)) return undefined;
  const signed = link.topic ? isUuid(link.topic) && links.verifyTopicUnsubscribe(link.id, link.topic, link.token) : links.verifyContact(link.id, link.token);
  if (!signed) return undefined;
  // The signed link names the contact; no project is known here.
  return (await ctx.state.em.findOne(Contact, { id: link.id })) ?? undefined;
}

function invalid(ctx: Context): void {
  ctx.status = 404;
  ctx.type = 'text/html';
  ctx.body = page('Link not valid', '<p>This link is not valid, or the address was removed.</p>');
}

const form = (action: string, label: string) => `<form method="post" action="${escapeHtml(action)}"><button type="submit">${escapeHtml(label)}</button></form>`;

// A bad link or token is the "not valid" page (404), never a validation error: nothing here fails.
const linkParams = { contactId: z.string().meta({ description: 'The contact’s id' }) };
const linkQuery = z.object({ token: z.string().optional().meta({ description: 'The link’s signature' }) });
const unsubscribeQuery = linkQuery.extend({
  topic: z.string().optional().meta({ description: 'The topic the email was sent for: unsubscribing leaves only that topic' }),
});
const linkOf = (input: { param(name: 'contactId'): string; query(): { token?: string; topic?: string } }): Link => ({
  id: input.param('contactId'),
  token: input.query().token,
  topic: input.query().topic,
});

const pageSpec = (summary: string, shows: string) => ({
  tag: 'Preference pages',
  summary,
  internal: true,
  params: linkParams,
  query: linkQuery,
  responses: { 200: content('text/html', shows), 404: content('text/html', 'The link is not valid, or the address was removed') },
});

/** Documented only: the handler reads the one-click field itself, so any other form still unsubscribes. */
const oneClickForm = z.object({ 'List-Unsubscribe': z.literal('One-Click').optional().meta({ description: 'RFC 8058 one-click unsubscribe' }) });

/**
 * The pages behind `unsubscribeUrl` and `subscribeUrl` (`manageUrl`, the preference center, is the consent module's). GET shows the page (so link
 * scanners change nothing); POST acts. A POST to the unsubscribe URL is also the RFC 8058 one-click
 * path (`List-Unsubscribe=One-Click`). Never rate limited: they carry no API key.
 */
export function preferencePageRoutes(router: Router, deps: { links: Links; formBody: Middleware; hub: ActivityHub }): void {
  const setSubscribed = async (ctx: Context, contact: Contact, subscribed: boolean, reason: string) => {
    const events = await transaction(ctx.state.em, (tx) => updateContactSubscription(tx, contact.id, subscribed, { reason }));
    deps.hub.publish({ projectId: contact.projectId, contactIds: [contact.id], events });
  };
  const self = (ctx: Context, link: Link) =>
    `${ctx.path}?${link.topic ? `topic=${encodeURIComponent(link.topic)}&` : ''}token=${encodeURIComponent(link.token ?? '')}`;
  // A topic's unsubscribe link: the topic, if it still exists in the contact's project.
  const topicOf = async (ctx: Context, c: Contact, link: Link) =>
    link.topic ? ((await ctx.state.em.findOne(Topic, { projectId: c.projectId, id: link.topic })) ?? undefined) : undefined;
  // Where "unsubscribe from all" lives on a topic's page: the contact's own (global) unsubscribe link.
  const leaveAll = (c: Contact) =>
    c.subscribed ? `<p>Or stop all marketing email:</p>${form(deps.links.contactPage('unsubscribe', c.id), 'Unsubscribe from all')}` : '';
  const manage = (c: Contact) => `<p><a href="${escapeHtml(deps.links.contactPage('manage', c.id))}">Manage your email preferences</a></p>`;

  router.get(
    '/unsubscribe/:contactId',
    endpoint({ ...pageSpec('Unsubscribe page (unsubscribeUrl)', 'Asks to confirm; changes nothing'), query: unsubscribeQuery }, async (ctx, input) => {
      const link = linkOf(input);
      const c = await contactOf(ctx, deps.links, link);
      if (!c) return invalid(ctx);
      ctx.type = 'text/html';
      const topic = await topicOf(ctx, c, link);
      if (topic) {
        const states = await topicStatesOf(ctx.state.em, c.projectId, c.id);
        const name = escapeHtml(topic.name);
        ctx.body =
          states[topic.id] === 'unsubscribed'
            ? page(`Unsubscribed from ${topic.name}`, `<p><b>${escapeHtml(c.email)}</b> receives no ${name} email.</p>${leaveAll(c)}${manage(c)}`)
            : page(
                `Unsubscribe from ${topic.name}`,
                `<p>Stop sending <b>${name}</b> email to <b>${escapeHtml(c.email)}</b>?</p>` +
                  `${form(self(ctx, link), `Unsubscribe from ${topic.name}`)}${leaveAll(c)}${manage(c)}`,
              );
        return;
      }
      ctx.body = c.subscribed
        ? page('Unsubscribe', `<p>Stop sending email to <b>${escapeHtml(c.email)}</b>?</p>${form(self(ctx, link), 'Unsubscribe')}`)
        : page('Unsubscribed', `<p><b>${escapeHtml(c.email)}</b> is unsubscribed.</p>`);
    }),
  );

  router.post(
    '/unsubscribe/:contactId',
    deps.formBody,
    endpoint(
      {
        ...pageSpec('Unsubscribe (also the RFC 8058 one-click POST); with `topic`, from that topic only', 'Unsubscribed'),
        query: unsubscribeQuery,
        body: oneClickForm,
        bodyContentTypes: ['application/x-www-form-urlencoded'],
        errors: { 422: null },
      },
      async (ctx, input) => {
        const link = linkOf(input);
        const c = await contactOf(ctx, deps.links, link);
        if (!c) return invalid(ctx);
        const oneClick = (ctx.request.body as Record<string, unknown> | undefined)?.['List-Unsubscribe'] === 'One-Click';
        const reason = oneClick ? 'one_click' : 'unsubscribe_link';
        ctx.type = 'text/html';
        // A topic's link leaves only that topic; one whose topic was deleted since leaves everything, as the reader asked to stop.
        const topic = await topicOf(ctx, c, link);
        if (topic) {
          const { events } = await transaction(ctx.state.em, (tx) => setContactTopics(tx, c.projectId, c.id, { [topic.id]: false }, { source: reason }));
          deps.hub.publish({ projectId: c.projectId, contactIds: [c.id], events });
          ctx.body = page(
            `Unsubscribed from ${topic.name}`,
            `<p><b>${escapeHtml(c.email)}</b> will receive no more ${escapeHtml(topic.name)} email.</p>${leaveAll(c)}${manage(c)}`,
          );
          return;
        }
        await setSubscribed(ctx, c, false, reason);
        ctx.body = page(
          'Unsubscribed',
          `<p><b>${escapeHtml(c.email)}</b> will receive no more marketing email.</p>` +
            `${form(self(ctx, link).replace('/unsubscribe/', '/subscribe/'), 'Subscribe again')}`,
        );
      },
    ),
  );

  router.get(
    '/subscribe/:contactId',
    endpoint(pageSpec('Subscribe page (subscribeUrl)', 'Asks to confirm; changes nothing'), async (ctx, input) => {
      const link = linkOf(input);
      const c = await contactOf(ctx, deps.links, link);
      if (!c) return invalid(ctx);
      ctx.type = 'text/html';
      ctx.body = c.subscribed
        ? page('Subscribed', `<p><b>${escapeHtml(c.email)}</b> is subscribed.</p>`)
        : page('Subscribe', `<p>Send email to <b>${escapeHtml(c.email)}</b> again?</p>${form(self(ctx, link), 'Subscribe')}`);
    }),
  );

  router.post(
    '/subscribe/:contactId',
    deps.formBody,
    endpoint(pageSpec('Subscribe again', 'Subscribed'), async (ctx, input) => {
      const c = await contactOf(ctx, deps.links, linkOf(input));
      if (!c) return invalid(ctx);
      await setSubscribed(ctx, c, true, 'subscribe_link');
      ctx.type = 'text/html';
      ctx.body = page('Subscribed', `<p><b>${escapeHtml(c.email)}</b> is subscribed again.</p>`);
    }),
  );
}
