import type Router from '@koa/router';
import { z } from 'zod';
import type { WorkflowStarter } from '../workflow-starter';
import type { Resolver } from '../../dns/resolver';
import { endpoint } from '../../http/endpoint';
import { notFound } from '../../errors';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import type { ReturnPathDns } from './domain-records';
import { createDomainSchema, domainResponse } from './domains.schemas';
import { checkDomain, createDomain, deleteDomain, getDomain, listDomains, toDomainDto } from './domains.service';

export interface DomainDeps {
  temporal: WorkflowStarter;
  resolver: Resolver;
  spfValue: string;
  returnPath: ReturnPathDns;
}

const tag = 'Domains';
const NOT_FOUND = { 404: 'No such domain in the project' };

export function domainRoutes(router: Router, g: Guards, deps: DomainDeps): void {
  router.post(
    '/domains',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Add a sending domain',
        description: 'Answers the DNS records to publish; the domain is checked in the background until verified.',
        body: createDomainSchema,
        responses: { 201: domainResponse.describe('The domain and its DNS records') },
        errors: { 409: 'The domain is already added to this project (DOMAIN_EXISTS)' },
      },
      async (ctx, input) => {
        const { domain } = input.body();
        const projectId = ctx.state.project!.id;
        const row = await createDomain(ctx.state.em, projectId, domain, deps.spfValue, (r) => deps.temporal.startDomainVerification({ id: r.id, projectId }));
        ctx.status = 201;
        ctx.body = toDomainDto(row, deps.returnPath, { recordStatus: false });
      },
    ),
  );

  router.get(
    '/domains/project/:projectId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List a project’s domains, verified and pending',
        params: { projectId: uuidPath },
        responses: { 200: z.array(domainResponse).describe('The domains') },
        errors: { 404: 'Not the key’s own project' },
      },
      async (ctx, input) => {
        const projectId = input.param('projectId');
        // Only the key's own project: another project's domains are as invisible as the project itself.
        if (projectId !== ctx.state.project!.id) throw notFound('Project');
        ctx.body = (await listDomains(ctx.state.em, projectId)).map((row) => toDomainDto(row, deps.returnPath));
      },
    ),
  );

  router.get(
    '/domains/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Get a domain, its DNS records and what the last check found',
        params: { id: uuidPath },
        responses: { 200: domainResponse.describe('The domain') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = toDomainDto(await getDomain(ctx.state.em, ctx.state.project!.id, input.param('id')), deps.returnPath);
      },
    ),
  );

  router.get(
    '/domains/:id/verify',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Check the domain’s DNS records now',
        params: { id: uuidPath },
        responses: { 200: domainResponse.describe('The domain with each record’s finding') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const row = await getDomain(ctx.state.em, ctx.state.project!.id, input.param('id'));
        ctx.body = toDomainDto((await checkDomain(ctx.state.em, deps.resolver, row.id, deps.returnPath)) ?? row, deps.returnPath);
      },
    ),
  );

  router.delete(
    '/domains/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Remove a domain',
        params: { id: uuidPath },
        responses: { 200: deletedResponse.describe('Removed') },
        errors: { ...NOT_FOUND, 409: 'The domain is used as a sender (DOMAIN_IN_USE)' },
      },
      async (ctx, input) => {
        const row = await deleteDomain(ctx.state.em, ctx.state.project!.id, input.param('id'));
        await deps.temporal.stopDomainVerification(row.id);
        ctx.body = { id: row.id, deleted: true };
      },
    ),
  );
}
