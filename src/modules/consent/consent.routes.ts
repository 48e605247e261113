import type Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { z } from 'zod';
import type { ActivityHub } from '../../bus/contact-activity';
import { isUuid } from '../../db/ids';
import { content, endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { okResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import { escapeHtml } from '../../mail/render';
import type { EventRecord } from '../events';
import { consentResponse, snippetResponse, subscribeQuery, subscribeSchema } from './consent.schemas';
import { type ConfirmationView, type ConsentDeps, confirm, consentOf, type RequestOrigin, viewConfirmation } from './consent.service';
import { contactOfLink, preferencePage, preferencesOf, readPreferenceForm, savePreferenceForm } from './preference-center';
import { subscribe, subscribeFormOf } from './subscribe-form';

/** The shell of every hosted page: readable, with a focus ring a keyboard user can always see. */
function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#222;line-height:1.5}
fieldset{border:1px solid #bbb;border-radius:.4rem;margin:0 0 1rem;padding:.5rem 1rem 1rem}legend{font-weight:600;padding:0 .3rem}
.topic{margin:.6rem 0}.desc{display:block;margin-left:1.7rem;color:#555;font-size:.9rem}input[type=checkbox]{width:1.1rem;height:1.1rem;vertical-align:middle}
button{font-size:1rem;padding:.6rem 1.2rem;border-radius:.4rem;border:1px solid #555;background:#f4f4f4;cursor:pointer}
:focus-visible{outline:3px solid #1a5fb4;outline-offset:2px}.saved{background:#e6f4ea;border:1px solid #8c8;padding:.5rem 1rem;\
border-radius:.4rem}</style></head>
<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
}

const html = (ctx: Context, status: number, title: string, body: string) => {
  ctx.status = status;
  ctx.type = 'text/html';
  ctx.body = page(title, body);
};

const originOf = (ctx: Context): RequestOrigin => ({ ip: ctx.ip || null, userAgent: ctx.get('user-agent') || null });

/** A form cannot set headers: `?key=pk_...` stands in for `Authorization: Bearer pk_...` when that is absent. */
const keyFromQuery: Middleware = async (ctx: Context, next: Next) => {
  const key = typeof ctx.query.key === 'string' ? ctx.query.key : undefined;
  if (key && !ctx.get('authorization')) ctx.request.headers.authorization = `Bearer ${key}`;
  await next();
};

const topicPhrase = (topics: string[]) => (topics.length ? topics.map((t) => `<b>${escapeHtml(t)}</b>`).join(', ') : 'email');

/** The confirmation page for every state a link can be in; never an error page or a stack trace. */
function confirmationPage(ctx: Context, view: ConfirmationView, action: string): void {
  if (view.state === 'invalid') return html(ctx, 404, 'Link not valid', '<p>This confirmation link is not valid. Check that it was copied whole.</p>');
  const what = `${topicPhrase(view.topics)} from ${escapeHtml(view.projectName)} at <b>${escapeHtml(view.email)}</b>`;
  if (view.state === 'used') return html(ctx, 410, 'Link already used', `<p>This link was used already: the subscription to ${what} is confirmed.</p>`);
  if (view.state === 'expired') {
    return html(ctx, 410, 'Link expired', `<p>This confirmation link has expired. Subscribe again to get a new one; nothing was changed.</p>`);
  }
  if (view.state === 'confirmed') return html(ctx, 200, 'Subscription confirmed', `<p>Thank you: you will receive ${what}.</p>`);
  html(
    ctx,
    200,
    'Confirm your subscription',
    `<p>Receive ${what}?</p><form method="post" action="${escapeHtml(action)}"><button type="submit">Confirm</button></form>`,
  );
}

const pageParams = (name: string) => ({ [name]: z.string().meta({ description: 'The id the link names' }) });
const tokenQuery = z.object({ token: z.string().optional().meta({ description: 'The link’s signature' }) });
const pageSpec = (summary: string, shows: string, param: string) => ({
  tag: 'Preference pages',
  summary,
  internal: true,
  params: pageParams(param),
  query: tokenQuery,
  responses: { 200: content('text/html', shows), 404: content('text/html', 'The link is not valid, or the contact was removed') },
});

export interface ConsentRouteDeps extends ConsentDeps {
  hub: ActivityHub;
  formBody: Middleware;
  publicUrl: string;
}

export function consentRoutes(router: Router, g: Guards, deps: ConsentRouteDeps): void {
  const publish = (projectId: string | undefined, contactId: string | undefined, events: EventRecord[]) => {
    if (projectId && contactId) deps.hub.publish({ projectId, contactIds: [contactId], events });
  };

  router.post(
    '/v1/subscribe',
    keyFromQuery,
    g.public,
    endpoint(
      {
        tag: 'Topics',
        summary: 'Subscribe an address (the hosted subscribe form)',
        description:
          'Creates the contact if needed and subscribes the topics (none: the global subscription), pending a confirmation email where ' +
          'double opt-in applies. Always `{ success: true }` for a valid request, whatever the address. An HTML form posts the same fields ' +
          'as application/x-www-form-urlencoded to `/v1/subscribe?key=<publicKey>` and gets a small HTML page. Rate limited per IP and per address.',
        query: subscribeQuery,
        body: subscribeSchema,
        bodyContentTypes: ['application/json', 'application/x-www-form-urlencoded'],
        responses: { 200: okResponse.describe('Accepted (JSON), or a thank-you page (text/html) for a form post') },
        errors: { 429: 'Too many requests from this IP address, or for this address, this hour' },
      },
      async (ctx, input) => {
        input.query();
        const projectId = ctx.state.project!.id;
        const result = await subscribe(ctx.state.em, deps, projectId, input.body(), originOf(ctx));
        publish(projectId, result.contactId, result.events);
        if (ctx.is('urlencoded')) {
          return html(
            ctx,
            200,
            'Thank you',
            '<p>Thank you for subscribing. If the address needs to confirm, a confirmation email is on its way: follow its link.</p>',
          );
        }
        ctx.body = { success: true };
      },
    ),
  );

  router.get(
    '/subscribe-form',
    g.secret,
    endpoint(
      {
        tag: 'Topics',
        summary: 'A copyable HTML subscribe form for this project',
        description: 'Posts to /v1/subscribe with the project’s public key; one checkbox per public topic, and the honeypot field.',
        responses: { 200: snippetResponse.describe('The form’s HTML and where it posts') },
      },
      async (ctx) => {
        ctx.body = await subscribeFormOf(ctx.state.em, deps.publicUrl, ctx.state.project!.id);
      },
    ),
  );

  router.get(
    '/contacts/:id/consent',
    g.secret,
    endpoint(
      {
        tag: 'Contacts',
        summary: 'A contact’s consent record (double opt-in requests and their confirmations)',
        params: { id: uuidPath },
        responses: { 200: consentResponse.describe('Newest first, with the time, IP and user agent of each request and confirmation') },
        errors: { 404: 'No such contact in the project' },
      },
      async (ctx, input) => {
        ctx.body = await consentOf(ctx.state.em, ctx.state.project!.id, input.param('id'));
      },
    ),
  );

  const self = (ctx: Context, token: string | undefined) => `${ctx.path}?token=${encodeURIComponent(token ?? '')}`;

  router.get(
    '/confirm/:confirmationId',
    endpoint(pageSpec('Double opt-in confirmation page (confirmUrl)', 'Asks to confirm; changes nothing', 'confirmationId'), async (ctx, input) => {
      const id = input.param('confirmationId');
      const { token } = input.query();
      const view = isUuid(id) ? await viewConfirmation(ctx.state.em, deps.links, id, token) : ({ state: 'invalid' } as const);
      confirmationPage(ctx, view, self(ctx, token));
    }),
  );

  router.post(
    '/confirm/:confirmationId',
    deps.formBody,
    endpoint(
      {
        ...pageSpec('Confirm a subscription', 'Confirmed', 'confirmationId'),
        responses: {
          200: content('text/html', 'Confirmed'),
          404: content('text/html', 'The link is not valid'),
          410: content('text/html', 'The link expired or was used already'),
        },
      },
      async (ctx, input) => {
        const id = input.param('confirmationId');
        const { token } = input.query();
        if (!isUuid(id)) return confirmationPage(ctx, { state: 'invalid' }, '');
        const result = await confirm(ctx.state.em, deps.links, id, token, originOf(ctx));
        publish(result.projectId, result.contactId, result.events);
        confirmationPage(ctx, result.view, self(ctx, token));
      },
    ),
  );

  const contactOf = (ctx: Context, id: string, token: string | undefined) => contactOfLink(ctx.state.em, deps.links, id, token);
  const invalid = (ctx: Context) => html(ctx, 404, 'Link not valid', '<p>This link is not valid, or the address was removed.</p>');

  router.get(
    '/manage/:contactId',
    endpoint(pageSpec('Preference center (manageUrl)', 'The public topics and the global subscription, as a form', 'contactId'), async (ctx, input) => {
      const { token } = input.query();
      const contact = await contactOf(ctx, input.param('contactId'), token);
      if (!contact) return invalid(ctx);
      html(ctx, 200, 'Email preferences', preferencePage(await preferencesOf(ctx.state.em, contact), self(ctx, token), false));
    }),
  );

  router.post(
    '/manage/:contactId',
    deps.formBody,
    endpoint(
      {
        ...pageSpec('Save the preference center', 'The page again, saying the preferences are saved', 'contactId'),
        body: z.object({
          topics: z
            .union([z.string(), z.array(z.string())])
            .optional()
            .meta({ description: 'The checked topics’ ids' }),
          shown: z
            .union([z.string(), z.array(z.string())])
            .optional()
            .meta({ description: 'The topics the page showed checked' }),
          unsubscribeAll: z.string().optional().meta({ description: 'Present: unsubscribe from all marketing email' }),
        }),
        bodyContentTypes: ['application/x-www-form-urlencoded'],
        errors: { 422: null },
      },
      async (ctx, input) => {
        const { token } = input.query();
        const contact = await contactOf(ctx, input.param('contactId'), token);
        if (!contact) return invalid(ctx);
        const { events, preferences } = await savePreferenceForm(ctx.state.em, contact, readPreferenceForm(ctx.request.body));
        publish(contact.projectId, contact.id, events);
        html(ctx, 200, 'Email preferences', preferencePage(preferences, self(ctx, token), true));
      },
    ),
  );
}
