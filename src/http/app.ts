import Koa from 'koa';
import Router from '@koa/router';
import { HttpMethodEnum, koaBody } from 'koa-body';
import type { Logger } from 'pino';
import type { EntityManager, Orm } from '../db/orm';
import { accountRoutes } from '../modules/accounts';
import { feedRoutes } from '../modules/feed';
import { analyticsRoutes } from '../modules/analytics';
import { securityRoutes } from '../modules/security';
import type { SendingJudge } from '../modules/security';
import { billingRoutes } from '../modules/billing';
import { S3Bucket } from '../modules/uploads';
import { contactRoutes } from '../modules/contacts';
import { domainRoutes } from '../modules/domains';
import { webhookEndpointRoutes } from '../modules/webhooks-out';
import { templateRoutes } from '../modules/templates';
import { suppressionRoutes } from '../modules/suppressions';
import { inboundEmailRoutes } from '../modules/inbound-emails';
import { topicRoutes } from '../modules/topics';
import { emailRoutes } from '../modules/emails';
import type { LocalEmailQueue, SendBatcher } from '../modules/emails';
import { trackingRoutes } from '../modules/emails';
import { preferencePageRoutes } from '../modules/contacts';
import { consentRoutes, type ConsentDeps, requestConfirmation } from '../modules/consent';
import { snsRoutes } from '../modules/webhooks-in';
import { segmentRoutes } from '../modules/segments';
import { campaignRoutes } from '../modules/campaigns';
import { automationRoutes } from '../modules/automations';
import type { ActivityHub } from '../bus/contact-activity';
import { SnsVerifier } from '../modules/webhooks-in';
import type { Links } from '../mail/links';
import type { TemporalClient } from '../../temporal/client';
import type { Config } from '../config';
import { devMailboxRoutes } from '../modules/dev-mailbox';
import { eventRoutes } from '../modules/events';
import { TrackBatcher } from '../modules/events';
import { uploadRoutes } from '../modules/uploads';
import { configRoutes } from '../modules/config';
import type { ProjectKeyCache } from '../modules/accounts';
import { verifyRoutes } from '../modules/verify';
import type { Resolver } from '../dns/resolver';
import { apiKey, session } from './auth';
import { chain } from './endpoint';
import { errorEnvelope } from './errors';
import type { Guards } from './guards';
import { type HealthCheck, healthRoutes, type ListenerState } from './health';
import { idempotency } from './idempotency';
import { httpMetrics, metricsRoutes } from './metrics';
import type { Metrics } from '../metrics';
import type { RateLimiter } from '../db/rate-limiter';
import { type PublicRateLimits, rateLimit } from './rate-limit';
import { openApiRoutes } from './openapi';
import { requestId } from './request-id';
import './state';

export interface AppDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  limiter: RateLimiter;
  /** The public key's budgets, apart from `limiter` (the secret key's). */
  publicLimits: PublicRateLimits;
  keys: ProjectKeyCache;
  resolver: Resolver;
  temporal: TemporalClient;
  jwtSecret: string;
  links: Links;
  hub: ActivityHub;
  health: HealthCheck[];
  /** This process's SMTP listeners, as /health reports them (filled in as they start). */
  listeners?: ReadonlyMap<string, ListenerState>;
  metrics: Metrics;
  /** This process's own email queue, when its worker drains one. */
  emailQueue?: LocalEmailQueue;
  /** Writes the one-statement sends of concurrent requests together. */
  sendBatcher?: SendBatcher;
  /** Judges a project's rates after its bounces and complaints (shared with the inbound MX). */
  judge: SendingJudge;
}

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
  configRoutes(router, config);
  accountRoutes(router, guards, {
    jwtSecret: deps.jwtSecret,
    disableSignup: config.DISABLE_SIGNUP,
    projectChanged: (id) => deps.keys.forgetProject(id),
    temporal: deps.temporal,
  });
  const consent: ConsentDeps = {
    links: deps.links,
    limits: config.sendLimits,
    queue: deps.emailQueue,
    confirmationExpiryHours: config.CONFIRMATION_EXPIRY_HOURS,
    log: deps.log,
  };
  contactRoutes(router, guards, {
    snoozed: (c) => deps.temporal.scheduleSnoozeEnd(c),
    hub: deps.hub,
    temporal: deps.temporal,
    confirmationNeeded: (r) =>
      requestConfirmation(deps.orm.em.fork(), consent, { ...r, subscribeAll: false, source: 'api', origin: { ip: r.ip, userAgent: r.userAgent } }),
  });
  eventRoutes(router, guards, { hub: deps.hub, batcher: new TrackBatcher(deps.orm) });
  verifyRoutes(router, guards, { resolver: deps.resolver });
  templateRoutes(router, guards, { links: deps.links });
  topicRoutes(router, guards);
  suppressionRoutes(router, guards, { temporal: deps.temporal });
  inboundEmailRoutes(router, guards);
  trackingRoutes(router, { links: deps.links, hub: deps.hub });
  preferencePageRoutes(router, { links: deps.links, formBody: jsonBody, hub: deps.hub });
  consentRoutes(router, guards, { ...consent, hub: deps.hub, formBody: jsonBody, publicUrl: config.publicUrl });
  // SNS posts JSON as text/plain.
  const textBody = koaBody({ text: true, json: true, textLimit: '1mb', jsonLimit: '1mb', multipart: false });
  const security = config.security;
  const rules = { softBounceLimit: config.SOFT_BOUNCE_LIMIT };
  snsRoutes(router, { verifier: new SnsVerifier(config.SNS_CERT_HOSTS), textBody, hub: deps.hub, judge: deps.judge, rules, topics: config.SNS_TOPIC_ARNS });
  segmentRoutes(router, guards, { temporal: deps.temporal, hub: deps.hub });
  campaignRoutes(router, guards, { temporal: deps.temporal, links: deps.links, hub: deps.hub });
  automationRoutes(router, guards, { temporal: deps.temporal, allowPrivateWebhooks: config.WEBHOOK_ALLOW_PRIVATE });
  emailRoutes(router, guards, {
    links: deps.links,
    hub: deps.hub,
    limits: config.sendLimits,
    queue: deps.emailQueue,
    batcher: deps.sendBatcher,
  });
  const bucket = config.S3_BUCKET
    ? new S3Bucket({
        endpoint: config.S3_ENDPOINT!,
        bucket: config.S3_BUCKET,
        region: config.S3_REGION,
        accessKeyId: config.S3_ACCESS_KEY_ID!,
        secretAccessKey: config.S3_SECRET_ACCESS_KEY!,
        sessionToken: config.S3_SESSION_TOKEN,
      })
    : undefined;
  uploadRoutes(router, guards, {
    store: { dataDir: config.dataDir, bucket },
    publicUrl: config.S3_PUBLIC_URL ?? config.publicUrl,
    maxBytes: config.UPLOAD_MAX_MB * 2 ** 20,
  });
  domainRoutes(router, guards, { temporal: deps.temporal, resolver: deps.resolver, spfValue: config.spfValue, returnPath: config.returnPath });
  webhookEndpointRoutes(router, guards, { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE });
  feedRoutes(router, guards);
  analyticsRoutes(router, guards);
  securityRoutes(router, guards, security);
  billingRoutes(router, guards, {
    publicUrl: config.publicUrl,
    stripe: config.STRIPE_SECRET_KEY
      ? { secretKey: config.STRIPE_SECRET_KEY, apiBase: config.STRIPE_API_BASE, priceId: config.STRIPE_PRICE_ID, webhookSecret: config.STRIPE_WEBHOOK_SECRET }
      : undefined,
  });
  // The dev mailbox exists only while the built-in capture SMTP server runs.
  if (!config.SMTP_URL) devMailboxRoutes(router, [...config.ALLOWED_HOSTS, new URL(config.publicUrl).host]);
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
