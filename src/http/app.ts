import Koa, { type Middleware } from 'koa';
import Router from '@koa/router';
import compose from 'koa-compose';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { Logger } from 'pino';
import type { EntityManager, Orm } from '../db/orm';
import { accountRoutes } from '../modules/accounts/accounts.routes';
import { contactRoutes, type ContactHooks } from '../modules/contacts/contacts.routes';
import { devMailboxRoutes } from '../modules/dev-mailbox/dev-mailbox.routes';
import { eventRoutes } from '../modules/events/events.routes';
import type { ProjectKeyCache } from '../modules/accounts/project-keys';
import { apiKey, session } from './auth';
import { errorEnvelope } from './errors';
import type { Guards } from './guards';
import { type HealthCheck, healthRoutes } from './health';
import { idempotency } from './idempotency';
import { rateLimit, type RateLimiter } from './rate-limit';
import { requestId } from './request-id';
import './state';

export interface AppDeps {
  orm: Orm;
  log: Logger;
  limiter: RateLimiter;
  keys: ProjectKeyCache;
  jwtSecret: string;
  disableSignup: boolean;
  idempotencyTtlHours: number;
  maxBodyMb: number;
  /** Mount /dev/mailbox (only when the built-in capture SMTP server runs). */
  devMailbox: boolean;
  health: HealthCheck[];
  hooks: { contacts: ContactHooks };
}

export function createApp(deps: AppDeps): Koa {
  const app = new Koa({ proxy: true });
  const limit = `${deps.maxBodyMb}mb`;
  const jsonBody = koaBody({
    jsonLimit: limit,
    formLimit: limit,
    textLimit: limit,
    multipart: false,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
  });
  const chain = (...mw: Middleware[]): Middleware => compose(mw) as Middleware;
  const guards: Guards = {
    secret: chain(apiKey('secret', deps.keys), rateLimit(deps.limiter), jsonBody),
    public: chain(apiKey('public', deps.keys), rateLimit(deps.limiter), jsonBody),
    session: chain(session(deps.jwtSecret), jsonBody),
    body: jsonBody,
    idempotent: idempotency(deps.idempotencyTtlHours),
  };

  const router = new Router();
  healthRoutes(router, deps.health);
  accountRoutes(router, guards, {
    jwtSecret: deps.jwtSecret,
    disableSignup: deps.disableSignup,
    projectChanged: (id) => deps.keys.forgetProject(id),
  });
  contactRoutes(router, guards, deps.hooks.contacts);
  eventRoutes(router, guards);
  if (deps.devMailbox) devMailboxRoutes(router);

  app.use(requestId(deps.log));
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
