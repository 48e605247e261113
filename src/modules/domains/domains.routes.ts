import type Router from '@koa/router';
import type { TemporalClient } from '../../../temporal/client';
import type { Resolver } from '../../dns/resolver';
import { notFound } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { body, uuidParam } from '../../http/validate';
import { startDomainVerification, stopDomainVerification } from './domain-verification';
import { createDomainSchema } from './domains.schemas';
import { checkDomain, createDomain, deleteDomain, getDomain, listDomains, toDomainDto } from './domains.service';

export interface DomainDeps {
  temporal: TemporalClient;
  resolver: Resolver;
  spfValue: string;
}

export function domainRoutes(router: Router, g: Guards, deps: DomainDeps): void {
  router.post('/domains', g.secret, async (ctx) => {
    const { domain } = body(ctx, createDomainSchema);
    const projectId = ctx.state.project!.id;
    const row = await createDomain(ctx.state.em, projectId, domain, deps.spfValue, (r) =>
      startDomainVerification(deps.temporal, { id: r.id, projectId }),
    );
    ctx.status = 201;
    ctx.body = toDomainDto(row, { recordStatus: false });
  });

  router.get('/domains/project/:projectId', g.secret, async (ctx) => {
    const projectId = uuidParam(ctx, 'projectId');
    // Only the key's own project: another project's domains are as invisible as the project itself.
    if (projectId !== ctx.state.project!.id) throw notFound('Project');
    ctx.body = (await listDomains(ctx.state.em, projectId)).map((row) => toDomainDto(row));
  });

  router.get('/domains/:id/verify', g.secret, async (ctx) => {
    const row = await getDomain(ctx.state.em, ctx.state.project!.id, uuidParam(ctx));
    ctx.body = toDomainDto((await checkDomain(ctx.state.em, deps.resolver, row.id)) ?? row);
  });

  router.delete('/domains/:id', g.secret, async (ctx) => {
    const row = await deleteDomain(ctx.state.em, ctx.state.project!.id, uuidParam(ctx));
    await stopDomainVerification(deps.temporal, row.id);
    ctx.body = { id: row.id, deleted: true };
  });
}
