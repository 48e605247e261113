import type { Context, Next } from 'koa';
import type { RateLimiter } from '../db/rate-limiter';
import { documented } from './endpoint';
import { AppError } from './errors';

export function rateLimit(limiter: RateLimiter) {
  return documented(
    async (ctx: Context, next: Next): Promise<void> => {
      const project = ctx.state.project;
      if (!project) return next();
      const d = await limiter.take(project.id);
      const headers = {
        'RateLimit-Limit': String(d.limit),
        'RateLimit-Remaining': String(d.remaining),
        'RateLimit-Reset': String(d.resetSeconds),
      };
      if (!d.allowed) {
        throw new AppError(429, 'RATE_LIMIT_EXCEEDED', `Rate limit of ${d.limit} requests per minute exceeded`, {
          headers: { ...headers, 'Retry-After': String(d.resetSeconds) },
          details: { limit: d.limit, retryAfterSeconds: d.resetSeconds },
        });
      }
      ctx.set(headers);
      await next();
    },
    { rateLimited: true },
  );
}
