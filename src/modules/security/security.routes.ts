import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Guards } from '../../http/guards';
import { uuidParam } from '../../http/validate';
import { membership } from '../accounts/accounts.service';
import { type SecurityThresholds, securityState } from './security.service';

/** Bounce and complaint rates and suspensions of a project: any member may read them. */
export function securityRoutes(router: Router, g: Guards, thresholds: SecurityThresholds): void {
  const read = async (ctx: Context) => {
    const id = uuidParam(ctx);
    await membership(ctx.state.em, ctx.state.user!.id, id);
    ctx.body = await securityState(ctx.state.em, id, thresholds);
  };
  router.get('/projects/:id/security', g.session, read);
  router.get('/users/@me/projects/:id/security', g.session, read);
}
