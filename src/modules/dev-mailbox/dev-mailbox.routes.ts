import type Router from '@koa/router';
import { queryValue, uuidParam } from '../../http/validate';
import { clearCaptured, getCaptured, listCaptured } from './dev-mailbox.service';

/** Exists only when the built-in capture SMTP server runs (no SMTP_URL). No auth: it is a local dev tool. */
export function devMailboxRoutes(router: Router): void {
  router.get('/dev/mailbox', async (ctx) => {
    const limit = Math.min(200, Math.max(1, Number.parseInt(queryValue(ctx, 'limit') ?? '', 10) || 50));
    const to = queryValue(ctx, 'to')?.trim().toLowerCase() || undefined;
    ctx.body = await listCaptured(ctx.state.em, { limit, to });
  });
  router.get('/dev/mailbox/:id', async (ctx) => {
    ctx.body = await getCaptured(ctx.state.em, uuidParam(ctx));
  });
  router.get('/dev/mailbox/:id/raw', async (ctx) => {
    ctx.type = 'message/rfc822';
    ctx.body = await getCaptured(ctx.state.em, uuidParam(ctx), true);
  });
  router.delete('/dev/mailbox', async (ctx) => {
    ctx.body = { deleted: await clearCaptured(ctx.state.em) };
  });
}
