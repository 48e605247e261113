import type Router from '@koa/router';
import type { Resolver } from '../../dns/resolver';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { verificationResponse, verifySchema } from './verify.schemas';
import { DomainDnsCache, lookupDomain, verifyEmail } from './verify.service';

export function verifyRoutes(router: Router, g: Guards, deps: { resolver: Resolver }): void {
  const dns = new DomainDnsCache((domain) => lookupDomain(deps.resolver, domain));

  router.post(
    '/v1/verify',
    g.secret,
    endpoint(
      {
        tag: 'Verify',
        summary: 'Verify an email address',
        description: 'A syntactically invalid address is 422; a DNS failure is reported in the result’s reasons, never as an error.',
        body: verifySchema,
        responses: { 200: verificationResponse.describe('The verification result') },
      },
      async (ctx, input) => {
        const { email } = input.body();
        ctx.body = { success: true, data: await verifyEmail(email, (domain) => dns.get(domain)) };
      },
    ),
  );
}
