import type Router from '@koa/router';
import { koaBody } from 'koa-body';
import type { Logger } from 'pino';
import type { TemporalClient } from '../temporal/client';
import type { ActivityHub } from './bus/contact-activity';
import type { Config } from './config';
import type { Orm } from './db/orm';
import type { Resolver } from './dns/resolver';
import type { HttpEdge } from './http/app';
import type { Links } from './mail/links';
import { accountRoutes, type ProjectKeyCache } from './modules/accounts';
import { analyticsRoutes } from './modules/analytics';
import { automationRoutes } from './modules/automations';
import { billingRoutes } from './modules/billing';
import { campaignRoutes } from './modules/campaigns';
import { configRoutes } from './modules/config';
import { consentRoutes, type ConsentDeps, requestConfirmation } from './modules/consent';
import { contactRoutes, preferencePageRoutes } from './modules/contacts';
import { devMailboxRoutes } from './modules/dev-mailbox';
import { domainRoutes } from './modules/domains';
import { emailRoutes, type LocalEmailQueue, type SendBatcher, trackingRoutes } from './modules/emails';
import { eventRoutes, TrackBatcher } from './modules/events';
import { feedRoutes } from './modules/feed';
import { inboundEmailRoutes } from './modules/inbound-emails';
import { securityRoutes, type SendingJudge } from './modules/security';
import { segmentRoutes } from './modules/segments';
import { suppressionRoutes } from './modules/suppressions';
import { templateRoutes } from './modules/templates';
import { topicRoutes } from './modules/topics';
import { S3Bucket, uploadRoutes } from './modules/uploads';
import { verifyRoutes } from './modules/verify';
import { snsRoutes, SnsVerifier } from './modules/webhooks-in';
import { webhookEndpointRoutes } from './modules/webhooks-out';

export interface ApiRouteDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  keys: ProjectKeyCache;
  resolver: Resolver;
  temporal: TemporalClient;
  jwtSecret: string;
  links: Links;
  hub: ActivityHub;
  /** This process's own email queue, when its worker drains one. */
  emailQueue?: LocalEmailQueue;
  /** Writes the one-statement sends of concurrent requests together. */
  sendBatcher?: SendBatcher;
  /** Judges a project's rates after its bounces and complaints (shared with the inbound MX). */
  judge: SendingJudge;
}

/**
 * Which module's routes the HTTP API serves, and what each is handed: main.ts's wiring of the API (the
 * composition root is main.ts and its two helpers, this and engine-ports.ts). http/app.ts builds the Koa
 * app around these routes; the order here is the router's.
 */
export function apiRoutes(deps: ApiRouteDeps): (router: Router, edge: HttpEdge) => void {
  const { config } = deps;
  return (router, edge) => {
    const { guards } = edge;
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
    preferencePageRoutes(router, { links: deps.links, formBody: edge.jsonBody, hub: deps.hub });
    consentRoutes(router, guards, { ...consent, hub: deps.hub, formBody: edge.jsonBody, publicUrl: config.publicUrl });
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
  };
}
