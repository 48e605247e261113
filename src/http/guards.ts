import type { Middleware } from 'koa';

/** The middleware chains every route picks from: who may call it, and how its body is read. */
export interface Guards {
  /** `sk_` key, project rate limit, JSON body. */
  secret: Middleware;
  /** `pk_` key, project rate limit, JSON body. */
  public: Middleware;
  /** Dashboard JWT cookie, JSON body. */
  session: Middleware;
  /** JSON body only, for the unauthenticated account endpoints. */
  body: Middleware;
  /** Idempotency-Key handling (after a key guard). */
  idempotent: Middleware;
}
