import crypto from 'node:crypto';
import type { Context, Next } from 'koa';
import type { RateDecision, RateLimiter } from '../db/rate-limiter';
import { clientPrefix } from '../net/client-prefix';
import { documented } from './endpoint';
import { AppError } from '../errors';

/** The public key's budgets: its own per project (never the secret key's), and each client's share of it. */
export interface PublicRateLimits {
  project: RateLimiter;
  perClient: RateLimiter;
}

const headersOf = (d: RateDecision) => ({
  'RateLimit-Limit': String(d.limit),
  'RateLimit-Remaining': String(d.remaining),
  'RateLimit-Reset': String(d.resetSeconds),
});

function refuse(d: RateDecision, what: string): never {
  throw new AppError(429, 'RATE_LIMIT_EXCEEDED', `Rate limit of ${d.limit} requests per minute${what} exceeded`, {
    headers: { ...headersOf(d), 'Retry-After': String(d.resetSeconds) },
    details: { limit: d.limit, retryAfterSeconds: d.resetSeconds },
  });
}

/**
 * The project's limit for secret-key requests. Public-key requests (anyone may send them) are counted
 * apart: first per client address (/64 for IPv6), then against the public key's own budget, so the
 * form and /v1/track can never use up what the secret-key API has.
 */
export function rateLimit(limiter: RateLimiter, publicLimits?: PublicRateLimits) {
  return documented(
    async (ctx: Context, next: Next): Promise<void> => {
      const project = ctx.state.project;
      if (!project) return next();
      let d: RateDecision;
      if (project.keyKind === 'public' && publicLimits) {
        // Hashed: the rate-limit table holds no client address in clear.
        const client = crypto.createHash('sha256').update(clientPrefix(ctx.ip)).digest('base64url');
        const mine = await publicLimits.perClient.take(project.id, `public-client:${client}`);
        if (!mine.allowed) refuse(mine, ' from this address');
        d = await publicLimits.project.take(project.id, 'public');
      } else {
        d = await limiter.take(project.id);
      }
      if (!d.allowed) refuse(d, '');
      ctx.set(headersOf(d));
      await next();
    },
    { rateLimited: true },
  );
}
