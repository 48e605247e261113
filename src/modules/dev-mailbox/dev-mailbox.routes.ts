import type Router from '@koa/router';
import { z } from 'zod';
import type { Context, Next } from 'koa';
import { content, documented, endpoint } from '../../http/endpoint';
import { forbidden } from '../../errors';
import { isLoopback } from '../../net/loopback';
import { queryInt, queryText } from '../../http/query';
import { uuidPath } from '../../validation';
import { clearCaptured, getCaptured, listCaptured } from './dev-mailbox.service';

const tag = 'Dev mailbox';
const mailboxQuery = z.object({
  limit: queryInt({ default: 50, min: 1, max: 200, zeroIsDefault: true }),
  to: queryText({ trim: true, lowerCase: true, description: 'Only mail to this address' }),
});

/**
 * `Host` names this machine: 127.0.0.1, localhost or [::1] with the port the request came in on, or a
 * name the operator listed (ALLOWED_HOSTS, PUBLIC_URL's). A page on a name that rebinds to 127.0.0.1
 * sends its own name, so a browser on this machine cannot be made to read the mailbox for it.
 */
function namesThisMachine(host: string, localPort: number | undefined, allowed: string[]): boolean {
  const name = host.toLowerCase();
  if (allowed.includes(name) || allowed.includes(name.replace(/:\d+$/, ''))) return true;
  const m = /^(127\.0\.0\.1|localhost|\[::1\]):(\d+)$/.exec(name);
  return m !== null && Number(m[2]) === localPort;
}

/**
 * The mailbox holds every message the service sent (sign-in and password-reset links included), so it
 * answers only clients on this machine: the connecting socket's address, never X-Forwarded-For, and a
 * Host that names this machine.
 */
const localOnly = (allowedHosts: string[]) =>
  documented(async (ctx: Context, next: Next): Promise<void> => {
    if (!isLoopback(ctx.req.socket.remoteAddress)) {
      throw forbidden('The dev mailbox answers only clients connecting from this machine (a loopback address)');
    }
    if (!namesThisMachine(ctx.req.headers.host ?? '', ctx.req.socket.localPort, allowedHosts)) {
      throw forbidden(
        `The dev mailbox answers only to 127.0.0.1, localhost or [::1] on this port (or ALLOWED_HOSTS), not to Host "${ctx.req.headers.host ?? ''}"`,
      );
    }
    await next();
  }, {});

/**
 * Exists only when the built-in capture SMTP server runs (no SMTP_URL), for local clients only (no auth: a
 * local dev tool). `allowedHosts`: Host values answered besides the loopback names.
 */
export function devMailboxRoutes(router: Router, allowedHosts: string[]): void {
  const loopbackOnly = localOnly(allowedHosts);
  router.get(
    '/dev/mailbox',
    loopbackOnly,
    endpoint(
      {
        tag,
        summary: 'Mail captured by the built-in SMTP server, newest first',
        internal: true,
        query: mailboxQuery,
        responses: { 200: 'The messages and their total' },
      },
      async (ctx, input) => {
        ctx.body = await listCaptured(ctx.state.em, input.query());
      },
    ),
  );
  router.get(
    '/dev/mailbox/:id',
    loopbackOnly,
    endpoint(
      {
        tag,
        summary: 'One captured message, parsed',
        internal: true,
        params: { id: uuidPath },
        responses: { 200: 'The message' },
        errors: { 404: 'No such message' },
      },
      async (ctx, input) => {
        ctx.body = await getCaptured(ctx.state.em, input.param('id'));
      },
    ),
  );
  router.get(
    '/dev/mailbox/:id/raw',
    loopbackOnly,
    endpoint(
      {
        tag,
        summary: 'One captured message as sent',
        internal: true,
        params: { id: uuidPath },
        responses: { 200: content('message/rfc822', 'The raw message') },
        errors: { 404: 'No such message' },
      },
      async (ctx, input) => {
        ctx.type = 'message/rfc822';
        ctx.body = await getCaptured(ctx.state.em, input.param('id'), true);
      },
    ),
  );
  router.delete(
    '/dev/mailbox',
    loopbackOnly,
    endpoint(
      {
        tag,
        summary: 'Delete every captured message',
        internal: true,
        responses: { 200: z.object({ deleted: z.number().int() }).describe('How many were deleted') },
      },
      async (ctx) => {
        ctx.body = { deleted: await clearCaptured(ctx.state.em) };
      },
    ),
  );
}
