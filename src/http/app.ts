import Koa from 'koa';
import Router from '@koa/router';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { Middleware } from 'koa';
import type { Logger } from 'pino';
import type { Config } from '../config';
import type { EntityManager, Orm } from '../db/orm';
import type { RateLimiter } from '../db/rate-limiter';
import type { Metrics } from '../metrics';
import type { ProjectKeyCache } from '../modules/accounts';
import { apiKey, session } from './auth';
import { chain } from './endpoint';
import { errorEnvelope } from './error-envelope';
import type { Guards } from './guards';
import { type HealthCheck, healthRoutes, type ListenerState } from './health';
import { idempotency } from './idempotency';
import { httpMetrics, metricsRoutes } from './metrics-endpoint';
import { openApiRoutes } from './openapi';
import { type PublicRateLimits, rateLimit } from './rate-limit';
import { requestId } from './request-id';
import './state';

/** What the app hands each route: its guards, and the JSON body parser for routes that choose their own guard. */
export interface HttpEdge {
  guards: Guards;
  jsonBody: Middleware;
}

export interface AppDeps {
  config: Pick<Config, 'TRUST_PROXY' | 'MAX_BODY_MB' | 'IDEMPOTENCY_TTL_HOURS' | 'METRICS_TOKEN' | 'publicUrl'>;
  orm: Orm;
  log: Logger;
  limiter: RateLimiter;
  /** The public key's budgets, apart from `limiter` (the secret key's). */
  publicLimits: PublicRateLimits;
  keys: ProjectKeyCache;
  jwtSecret: string;
  health: HealthCheck[];
  /** This process's SMTP listeners, as /health reports them (filled in as they start). */
  listeners?: ReadonlyMap<string, ListenerState>;
  metrics: Metrics;
  /** The modules' routes, as main.ts wires them (src/api-routes.ts). */
  routes: (router: Router, edge: HttpEdge) => void;
}

/**
 * The Koa app: body parsing, the guards, the middleware every request passes, and the HTTP layer's own
 * routes (health, metrics, OpenAPI) around the modules' routes it is handed. It builds nothing else.
 */
export function createApp(deps: AppDeps): Koa {
  const { config } = deps;
  // X-Forwarded-* only from a proxy the operator vouches for; otherwise any client could claim https or an address.
  const app = new Koa({ proxy: config.TRUST_PROXY });
  const limit = `${config.MAX_BODY_MB}mb`;
  const jsonBody = koaBody({
    jsonLimit: limit,
    formLimit: limit,
    textLimit: limit,
    multipart: false,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
  });
  const guards: Guards = {
    secret: chain(apiKey('secret', deps.keys), rateLimit(deps.limiter), jsonBody),
    public: chain(apiKey('public', deps.keys), rateLimit(deps.limiter, deps.publicLimits), jsonBody),
    session: chain(session(deps.jwtSecret), jsonBody),
    body: jsonBody,
    idempotent: idempotency(config.IDEMPOTENCY_TTL_HOURS),
  };

  const router = new Router();
  healthRoutes(router, deps.health, deps.listeners);
  metricsRoutes(router, deps.metrics, config.METRICS_TOKEN);
  deps.routes(router, { guards, jsonBody });
  openApiRoutes(router, { serverUrl: config.publicUrl });

  app.use(requestId(deps.log));
  app.use(httpMetrics(deps.metrics));
  app.use(errorEnvelope);
  // A request's own entity manager, forked on first use: most hot paths only run raw SQL.
  app.use(async (ctx, next) => {
    let em: EntityManager | undefined;
    Object.defineProperty(ctx.state, 'em', { get: () => (em ??= deps.orm.em.fork()), configurable: true });
    await next();
  });
  app.use(router.routes());
  return app;
}
