import type Router from '@koa/router';
import type { RouterContext } from '@koa/router';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { uuidPath } from '../../validation';
import { membership } from '../accounts';
import { type SecurityThresholds, securityState } from './security.service';

/** Bounce and complaint rates and suspensions of a project: any member may read them. */
export function securityRoutes(router: Router, g: Guards, thresholds: SecurityThresholds): void {
  const spec = {
    tag: 'Projects',
    summary: 'Bounce and complaint rates, thresholds and suspensions',
    params: { id: uuidPath },
    responses: { 200: '`{ status, disabled, disabledReason, window, sent, bounced, complained, bounceRate, complaintRate, thresholds, suspensions }`' },
    errors: { 404: 'No such project among the caller’s' },
  };
  const read = async (ctx: RouterContext, input: { param(name: 'id'): string }) => {
    const id = input.param('id');
    await membership(ctx.state.em, ctx.state.user!.id, id);
    ctx.body = await securityState(ctx.state.em, id, thresholds);
  };
  router.get('/projects/:id/security', g.session, endpoint(spec, read));
  router.get('/users/@me/projects/:id/security', g.session, endpoint(spec, read));
}
