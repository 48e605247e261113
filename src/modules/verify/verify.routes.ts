import type Router from '@koa/router';
import type { Resolver } from '../../dns/resolver';
import type { Guards } from '../../http/guards';
import { body } from '../../http/validate';
import { verifySchema } from './verify.schemas';
import { DomainDnsCache, lookupDomain, verifyEmail } from './verify.service';

/**
 * POST /v1/verify (secret key). Body `{ email }`: a syntactically invalid address is 422.
 * 200 `{ success: true, data: <verification result> }`; a DNS failure is reported in the result's
 * `reasons`, never as an error.
 */
export function verifyRoutes(router: Router, g: Guards, deps: { resolver: Resolver }): void {
  const dns = new DomainDnsCache((domain) => lookupDomain(deps.resolver, domain));

  router.post('/v1/verify', g.secret, async (ctx) => {
    const { email } = body(ctx, verifySchema);
    ctx.body = { success: true, data: await verifyEmail(email, (domain) => dns.get(domain)) };
  });
}
