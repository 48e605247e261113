// First: on an older Node this stops the process before any module that fails to load there is loaded.
import './node-version';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ConfigError, type Config, type Listener, loadConfig, type Role } from './config';
import { startEmbeddedPostgres } from './db/embedded-postgres';
import { createOrm, migrate, type Orm } from './db/orm';
import { entities } from './modules/entities';
import { createApp } from './http/app';
import { type ApiRouteDeps, apiRoutes } from './api-routes';
import type { HealthCheck, ListenerState } from './http/health';
import { isLoopback } from './net/loopback';
import { serveMetrics } from './http/metrics-endpoint';
import { listen } from './http/server';
import { Resolver } from './dns/resolver';
import { RateLimiter } from './db/rate-limiter';
import { createLogger, type Logger } from './log';
import { Metrics } from './metrics';
import { startCaptureSmtp } from './mail/capture-smtp';
import { InsecureSubmissionError, startSubmissionListener } from './mail/submission-listener';
import { InboundReports } from './inbound/inbound-reports';
import { type MxHandler, startMxListener } from './inbound/mx-listener';
import { ReportAuthenticity } from './inbound/report-authenticity';
import { ReportThreads } from './inbound/report-threads';
import { ReceivedMail } from './inbound/received-mail';
import { ReturnPaths } from './mail/return-path';
import { ConnectionGate, type ConnectionLimits, fitToFileLimit, gateServer, openFileLimit } from './net/connection-limits';
import { MAX_RECIPIENTS } from './modules/emails';
import { SmtpSubmission } from './modules/emails';
import { SendingJudge } from './modules/security';
import { ProjectKeyCache } from './modules/accounts';
import { storeCaptured } from './modules/dev-mailbox';
import { EMAIL_QUEUED_CHANNEL, type LocalEmailQueue, SendBatcher } from './modules/emails';
import { QueueSignal } from './db/work-queue';
import { DeliveryEngine, DeliveryThreads, InProcessSender, type MessageSender } from './delivery';
import { deliveryPorts, inboundPorts } from './engine-ports';
import { Mailer } from './mail/transport';
import { Links } from './mail/links';
import { ActivityHub } from './bus/contact-activity';
import { LiveMembership } from './modules/segments';
import { AUTOMATION_OUTBOX_CHANNEL, AutomationDispatcher } from './modules/automations';
import { WebhookDispatcher } from './modules/webhooks-out';
import { CampaignStops } from './modules/campaigns';
import { WEBHOOK_DELIVERIES_CHANNEL } from './modules/webhooks-out';
import { AutomationRuntime } from './modules/automations';
import { connectTemporal, ensureSearchAttributes, type TemporalClient } from '../temporal/client';
import { startDevServer } from '@postbox/temporal-devserver';
import { dispatcherWaker, ensureStandingWorkflows, stopOwnDispatchers } from '../temporal/standing-workflows';
import { campaignChunkQueue, workflowIds } from '../temporal/workflow-ids';
import { type RunningWorker, startWorker } from '../temporal/worker';

export interface Service {
  /** Base URL of the HTTP API (roles all and api). */
  url?: string;
  port?: number;
  /** SMTP submission's listener (and its implicit-TLS one), when on. */
  submissionPort?: number;
  submissionTlsPort?: number;
  /** The inbound MX (bounces and complaints), when on. */
  inboundPort?: number;
  /** METRICS_PORT's listener, when set. */
  metricsPort?: number;
  /** The Temporal Web UI this process serves beside its built-in dev server, if any. */
  temporalUiUrl?: string;
  /** The workflow ids of this worker's own email dispatchers (none without a worker). */
  emailDispatchers: string[];
  databaseUrl: string;
  smtpUrl: string;
  orm: Orm;
  temporal: TemporalClient;
  /** Live segment membership of this process; `settled()` waits for pending evaluations. */
  live: LiveMembership;
  stop(): Promise<void>;
}

function readOrCreateSecret(file: string): string {
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const secret = crypto.randomBytes(32).toString('hex');
  fs.writeFileSync(file, secret + '\n', { mode: 0o600 });
  return secret;
}

/** What each piece of a starting service pushes its stop onto; they run in reverse, so what started last stops first. */
type Stops = Array<() => Promise<void>>;

/** What every piece after the database and Temporal is built from. */
interface Core {
  config: Config;
  log: Logger;
  stops: Stops;
  databaseUrl: string;
  orm: Orm;
  metrics: Metrics;
  gates: Record<Listener, ConnectionGate>;
  smtpUrl: string;
  temporal: TemporalClient;
  resolver: Resolver;
  /** Signs sessions, tracking links and return paths. */
  secret: string;
  links: Links;
  returnPaths: ReturnPaths;
  hub: ActivityHub;
  health: HealthCheck[];
}

/** Brings up one role of the service, starting the embedded pieces whose settings are unset. */
export async function startService(role: Role, config: Config, log: Logger): Promise<Service> {
  const stops: Stops = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) {
      await stop().catch((err) => log.error({ err }, 'error while stopping'));
    }
  };
  try {
    fs.mkdirSync(config.dataDir, { recursive: true });
    const { databaseUrl, orm } = await startDatabase(config, log, stops);
    const metrics = new Metrics(orm);
    const gates = connectionGates(config, log, metrics);
    const smtpUrl = config.SMTP_URL ?? (await startDevMailbox(config, log, stops, orm, gates.devSmtp));
    const { temporal, uiUrl: temporalUiUrl } = await startTemporal(config, databaseUrl, log, stops, metrics, gates);
    const core = sharedPieces({ config, log, stops, databaseUrl, orm, metrics, gates, smtpUrl, temporal });
    const live = new LiveMembership(orm, core.hub, log);
    stops.push(() => live.settled());

    const worker = role === 'all' || role === 'worker' ? await startWorkerRole(core) : undefined;
    const api = role === 'all' || role === 'api' ? await startApiRole(core, worker?.emailQueue) : undefined;
    const metricsPort = config.METRICS_PORT === undefined ? undefined : await startMetricsListener(core, worker?.health);

    return {
      url: api?.url,
      port: api?.port,
      submissionPort: api?.submission?.port,
      submissionTlsPort: api?.submission?.tlsPort,
      inboundPort: api?.inboundPort,
      metricsPort,
      temporalUiUrl,
      emailDispatchers: worker?.emailDispatchers ?? [],
      databaseUrl,
      smtpUrl,
      orm,
      temporal,
      live,
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

/** DATABASE_URL, or the embedded PostgreSQL in the data directory; migrated before anything uses it. */
async function startDatabase(config: Config, log: Logger, stops: Stops): Promise<{ databaseUrl: string; orm: Orm }> {
  let databaseUrl = config.DATABASE_URL;
  if (!databaseUrl) {
    const pg = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.EMBEDDED_POSTGRES_PORT, log });
    stops.push(pg.stop);
    databaseUrl = pg.url;
  }
  const orm = await createOrm(databaseUrl, { entities, poolMax: config.databasePoolMax, log });
  stops.push(() => orm.close());
  const applied = await migrate(orm, databaseUrl);
  if (applied.length) log.info({ migrations: applied }, 'migrations applied');
  return { databaseUrl, orm };
}

/** Without SMTP_URL, mail goes to the built-in capture server (GET /dev/mailbox); answers its URL. */
async function startDevMailbox(config: Config, log: Logger, stops: Stops, orm: Orm, gate: ConnectionGate): Promise<string> {
  const capture = await startCaptureSmtp({ port: config.DEV_SMTP_PORT, store: (msg) => storeCaptured(orm.em.fork(), msg), log, gate });
  stops.push(capture.close);
  log.info({ port: capture.port }, 'dev mailbox SMTP server listening (see GET /dev/mailbox)');
  if (!isLoopback(config.HOST)) {
    log.warn(
      { host: config.HOST },
      'no SMTP_URL: mail is captured, not delivered, and HOST is not a loopback address; GET /dev/mailbox still answers only clients on this machine',
    );
  }
  return `smtp://127.0.0.1:${capture.port}`;
}

/** The pieces every role shares: DNS, the secret and what it signs, the in-process activity hub, the health checks. */
function sharedPieces(c: Omit<Core, 'resolver' | 'secret' | 'links' | 'returnPaths' | 'hub' | 'health'>): Core {
  const { config, orm, temporal, metrics, log } = c;
  const secret = config.JWT_SECRET ?? readOrCreateSecret(path.join(config.dataDir, 'jwt-secret'));
  // Committed contact activity fans out in-process: live segment membership (and, later, automations).
  const hub = new ActivityHub(log);
  hub.on(metrics.countEmailEvents);
  const health: HealthCheck[] = [
    {
      name: 'database',
      check: async () => {
        const connection = await orm.checkConnection();
        if (!connection.ok) throw connection.error ?? new Error(connection.reason);
      },
    },
    { name: 'temporal', check: () => temporal.ping() },
  ];
  return {
    ...c,
    resolver: new Resolver(config.DNS_SERVERS),
    secret,
    links: new Links(config.publicUrl, secret),
    returnPaths: new ReturnPaths(secret, config.returnPath.prefix),
    hub,
    health,
  };
}

/**
 * The worker role: the delivery engine and its senders, the queues that wake the dispatchers, and the
 * Temporal worker with the standing workflows. Answers the email queue the API of this process tells of its mail.
 */
async function startWorkerRole(core: Core): Promise<{ emailQueue: LocalEmailQueue; health: () => Promise<void>; emailDispatchers: string[] }> {
  const { config, log, stops, orm, temporal, metrics, hub, links, resolver, databaseUrl } = core;
  const { mailer, sender } = smtpSenders(core);
  const counts = {
    emailDispatchers: config.EMAIL_DISPATCHERS,
    automationDispatchers: config.AUTOMATION_DISPATCHERS,
    webhookDispatchers: config.WEBHOOK_DISPATCHERS,
  };
  // This process's own task queue: its email dispatchers' drains run here and nowhere else.
  const ownQueue = ownTaskQueue(config.TEMPORAL_TASK_QUEUE);
  const listen = (channel: string, kind: 'email' | 'automation' | 'webhook') => listenForWork(core, channel, kind, counts, ownQueue);
  const queue = await listen(EMAIL_QUEUED_CHANNEL, 'email');
  // DELIVERY_IN_FLIGHT send slots: each holds at most one message handed to SMTP whose outcome is not yet recorded.
  const delivery = new DeliveryEngine({
    orm,
    ports: deliveryPorts,
    sender,
    queue,
    log,
    hub,
    retryBaseSeconds: config.EMAIL_RETRY_BASE_SECONDS,
    softBounceLimit: config.SOFT_BOUNCE_LIMIT,
    metrics,
    concurrency: config.deliveryInFlight,
    returnPaths: core.returnPaths,
  });
  const automationQueue = await listen(AUTOMATION_OUTBOX_CHANNEL, 'automation');
  const webhookQueue = await listen(WEBHOOK_DELIVERIES_CHANNEL, 'webhook');
  const campaignStops = new CampaignStops(databaseUrl, log);
  await campaignStops.start();
  stops.push(() => campaignStops.stop());
  const worker: RunningWorker = await startWorker({
    address: temporal.address,
    namespace: temporal.namespace,
    taskQueue: temporal.taskQueue,
    ownQueue,
    maxCachedWorkflows: config.TEMPORAL_MAX_CACHED_WORKFLOWS,
    orm,
    log,
    metrics,
    shutdownTimeoutSeconds: config.SHUTDOWN_TIMEOUT_SECONDS,
    resolver,
    accountMail: { mailer, publicUrl: config.publicUrl, from: config.systemEmailFrom },
    dispatcher: delivery,
    hub,
    segmentRefreshSeconds: config.SEGMENT_REFRESH_SECONDS,
    campaignBatchSize: config.CAMPAIGN_BATCH_SIZE,
    campaignChunksPerWorker: config.CAMPAIGN_CHUNKS_PER_WORKER,
    workersPolling: workersPolling(temporal),
    campaignStops,
    automation: new AutomationRuntime({ orm, hub, links, resolver, allowPrivateWebhooks: config.WEBHOOK_ALLOW_PRIVATE, log }),
    automationDispatcher: new AutomationDispatcher({ orm, temporal, queue: automationQueue, log }),
    webhookDispatcher: new WebhookDispatcher({
      orm,
      queue: webhookQueue,
      log,
      resolver,
      allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
      retryBaseSeconds: config.WEBHOOK_RETRY_BASE_SECONDS,
    }),
    idempotencyTtlHours: config.IDEMPOTENCY_TTL_HOURS,
    inboundEmailRetentionDays: config.INBOUND_EMAIL_RETENTION_DAYS,
    consent: { links, limits: config.sendLimits, confirmationExpiryHours: config.CONFIRMATION_EXPIRY_HOURS, log },
    domainCheckIntervalSeconds: config.DOMAIN_CHECK_INTERVAL_SECONDS,
    returnPath: config.returnPath,
    dispatchIdleSeconds: config.DISPATCH_IDLE_SECONDS,
  });
  stops.push(() => worker.stop());
  // Before the worker stops (stops run in reverse): its dispatchers end, their drains give their claims back.
  stops.push(() => stopOwnDispatchers(temporal, counts, ownQueue));
  await ensureStandingWorkflows(temporal, counts, { activityFoldSeconds: config.ACTIVITY_FOLD_SECONDS }, ownQueue);
  return {
    emailQueue: delivery,
    // The worker's healthcheck on METRICS_PORT (GET /health).
    health: () => workerPolls(temporal, worker),
    emailDispatchers: Array.from({ length: counts.emailDispatchers }, (_, shard) => workflowIds.emailDispatch(ownQueue, shard)),
  };
}

/** The worker role's SMTP senders: account mail on one connection, delivery's on its threads (or this one). */
function smtpSenders(core: Core): { mailer: Mailer; sender: MessageSender } {
  const { config, smtpUrl, links } = core;
  // Account mail (verification, password reset) is rare: one connection on the main thread.
  const mailer = new Mailer(smtpUrl, { maxConnections: 1 });
  const sender =
    config.mailThreads > 0
      ? new DeliveryThreads(smtpUrl, { threads: config.mailThreads, maxConnections: config.SMTP_POOL_SIZE }, links)
      : new InProcessSender(smtpUrl, config.SMTP_POOL_SIZE, links);
  core.stops.push(async () => {
    mailer.close();
    await sender.close();
  });
  return { mailer, sender };
}

/** A work queue's LISTEN connection: queued work wakes this process's running drains, or else the sleeping dispatcher executions. */
async function listenForWork(
  core: Core,
  channel: string,
  kind: 'email' | 'automation' | 'webhook',
  counts: Parameters<typeof dispatcherWaker>[2],
  ownQueue: string,
): Promise<QueueSignal> {
  const { log, temporal } = core;
  const queue = new QueueSignal(core.databaseUrl, channel, log);
  const waker = dispatcherWaker(temporal, kind, counts, ownQueue, (err) => log.warn({ err, kind }, 'could not wake dispatchers'));
  queue.onIdleNotification(waker.notify);
  await queue.start();
  core.stops.push(async () => {
    waker.stop();
    await queue.stop();
  });
  return queue;
}

/**
 * The API role: the HTTP API, then the inbound MX and SMTP submission beside it. `emailQueue` is this
 * process's worker's, when it runs one: requests hand their mail to its drains directly.
 */
async function startApiRole(core: Core, emailQueue: LocalEmailQueue | undefined) {
  const { config, log, stops, orm, databaseUrl, metrics } = core;
  const limiter = new RateLimiter(orm, config.RATE_LIMIT_PER_MINUTE);
  const keys = new ProjectKeyCache(databaseUrl, log);
  await keys.start();
  stops.push(() => keys.stop());
  // One for /v1/send and SMTP submission: their concurrent sends share statements.
  const sendBatcher = new SendBatcher(orm);
  // One per process: SNS notifications and the inbound MX's reports share each project's judgements.
  const judge = new SendingJudge(() => orm.em.fork(), config.security, log);
  const listeners = new Map<string, ListenerState>();
  const report = listenerReport(listeners, metrics);
  const { url, port } = await startHttpApi(core, { limiter, keys, listeners, emailQueue, sendBatcher, judge });
  const inboundPort = config.inbound.port === 0 ? undefined : await startInbound(core, judge, (state) => report('inboundMx', state));
  const submission =
    config.submission.port === 0
      ? undefined
      : await startSubmission(
          core,
          (state) => report('submission', state),
          new SmtpSubmission({
            orm,
            keys,
            limiter,
            links: core.links,
            limits: config.sendLimits,
            queue: emailQueue,
            batcher: sendBatcher,
            hub: core.hub,
            idempotencyTtlHours: config.IDEMPOTENCY_TTL_HOURS,
            log,
          }),
        );
  return { url, port, inboundPort, submission };
}

/** The HTTP API's listener, with the drain on SIGTERM a load balancer needs. */
async function startHttpApi(
  core: Core,
  parts: Pick<ApiRouteDeps, 'keys' | 'emailQueue' | 'sendBatcher' | 'judge'> & { limiter: RateLimiter; listeners: Map<string, ListenerState> },
): Promise<{ url: string; port: number }> {
  const { config, log, stops, orm, metrics, health } = core;
  const app = createApp({
    config,
    orm,
    log,
    limiter: parts.limiter,
    publicLimits: {
      project: new RateLimiter(orm, config.PUBLIC_RATE_LIMIT_PER_MINUTE),
      perClient: new RateLimiter(orm, config.PUBLIC_RATE_LIMIT_PER_CLIENT_PER_MINUTE),
    },
    keys: parts.keys,
    jwtSecret: core.secret,
    health,
    listeners: parts.listeners,
    metrics,
    routes: apiRoutes({
      config,
      orm,
      log,
      keys: parts.keys,
      resolver: core.resolver,
      temporal: core.temporal,
      jwtSecret: core.secret,
      links: core.links,
      hub: core.hub,
      emailQueue: parts.emailQueue,
      sendBatcher: parts.sendBatcher,
      judge: parts.judge,
    }),
  });
  const server = await listen(app.callback(), {
    host: config.HOST,
    port: config.PORT,
    gate: core.gates.http,
    headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_SECONDS * 1000,
  });
  // On SIGTERM /health turns 503 at once, so the load balancer stops sending, while the listener
  // keeps serving for SHUTDOWN_DRAIN_SECONDS: connections already in its accept queue are answered,
  // not reset, and each answer closes its connection. Then it closes and the requests in flight finish.
  let draining = false;
  health.push({
    name: 'shutdown',
    check: async () => {
      if (draining) throw new Error('shutting down');
    },
  });
  const url = `http://${config.HOST === '0.0.0.0' || config.HOST === '::' ? '127.0.0.1' : config.HOST}:${server.port}`;
  // Stopped first: the requests in flight finish while everything they use is still up.
  stops.push(async () => {
    draining = true;
    server.drain();
    await new Promise((r) => setTimeout(r, config.SHUTDOWN_DRAIN_SECONDS * 1000));
    await server.close(config.SHUTDOWN_TIMEOUT_SECONDS * 1000);
  });
  log.info({ url, publicUrl: config.publicUrl }, 'HTTP API listening');
  return { url, port: server.port };
}

/** METRICS_PORT's listener: GET /metrics, and the worker's healthcheck when this process runs one. */
async function startMetricsListener(core: Core, workerHealth: (() => Promise<void>) | undefined): Promise<number> {
  const { config, log, stops } = core;
  const listenOn = { host: config.HOST, port: config.METRICS_PORT!, gate: core.gates.metrics, headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_SECONDS * 1000 };
  const server = await serveMetrics(core.metrics, listenOn, config.METRICS_TOKEN, workerHealth);
  stops.push(() => server.close(1000));
  log.info({ port: server.port }, 'metrics listening (GET /metrics)');
  return server.port;
}

/**
 * Each listener's gate, with the configured limits fitted under this process's open-file limit: a
 * process out of descriptors aborts (a worker thread cannot start its event loop), so the listeners
 * refuse connections long before that.
 */
function connectionGates(config: Config, log: Logger, metrics: Metrics): Record<Listener, ConnectionGate> {
  const fileLimit = openFileLimit();
  const { limits, scaled } = fitToFileLimit(config.connectionLimits, fileLimit);
  if (scaled) {
    log.warn(
      { fileLimit, limits },
      `the open-file limit (${fileLimit}) is low for the listeners' connection limits; they are lowered to fit (raise ulimit -n)`,
    );
  }
  const refused = (listener: string, reason: string) => metrics.connectionsRefused.inc({ listener, reason });
  return Object.fromEntries(Object.entries<ConnectionLimits>(limits).map(([name, l]) => [name, new ConnectionGate(name, l, log, refused)])) as Record<
    Listener,
    ConnectionGate
  >;
}

/**
 * SMTP submission's listener. The default port already taken (another process of ours on this machine,
 * a second API process, say), or a non-loopback HOST without a certificate, leaves this process without
 * one, as a warning; a port that was set is an error.
 */
async function startSubmission(core: Core, report: (state: ListenerState) => void, handler: SmtpSubmission) {
  const { config, log, stops } = core;
  try {
    const listener = await startSubmissionListener(
      {
        host: config.SMTP_SUBMISSION_HOST ?? config.HOST,
        port: config.submission.port,
        tlsPort: config.SMTP_SUBMISSION_TLS_PORT,
        tls: config.SMTP_SUBMISSION_TLS_CERT ? { certFile: config.SMTP_SUBMISSION_TLS_CERT, keyFile: config.SMTP_SUBMISSION_TLS_KEY! } : undefined,
        allowInsecureAuth: config.SMTP_SUBMISSION_ALLOW_INSECURE_AUTH,
        maxBytes: config.sendLimits.messageMaxBytes,
        maxRecipients: MAX_RECIPIENTS,
        idleSeconds: config.SMTP_SUBMISSION_IDLE_SECONDS,
        authTimeoutSeconds: config.SMTP_SUBMISSION_AUTH_TIMEOUT_SECONDS,
        reverseDns: config.SMTP_REVERSE_DNS,
        gate: core.gates.submission,
        log,
      },
      handler,
    );
    stops.push(listener.close);
    report({ status: 'listening', port: listener.port });
    log.info({ port: listener.port, tlsPort: listener.tlsPort }, 'SMTP submission listening');
    return { port: listener.port, tlsPort: listener.tlsPort };
  } catch (err) {
    if (err instanceof InsecureSubmissionError && !config.submission.explicit) {
      log.warn(`${err.message}; this process does not listen for SMTP submission`);
      return undefined;
    }
    if (config.submission.explicit || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const message =
      `SMTP submission is not listening: port ${config.submission.port} is taken (another postbox process?); ` +
      'set SMTP_SUBMISSION_PORT to choose one, 0 for none';
    log.warn({ port: config.submission.port }, message);
    report({ status: 'down', port: config.submission.port, error: message });
    return undefined;
  }
}

/**
 * The inbound MX, for bounces and complaints, and received mail for inbound hosts. As with submission, the
 * default port taken (another process of ours on this machine) leaves this one without it, as a warning; a
 * port that was set is an error.
 */
async function startInbound(core: Core, judge: SendingJudge, report: (state: ListenerState) => void) {
  const { config, log, stops, orm, hub } = core;
  // Closed after the MX (stops run in reverse), which stops handing it messages first.
  const reader = new ReportThreads({ threads: Math.min(2, Math.max(1, os.availableParallelism() - 1)), deadlineMs: 30_000 });
  stops.push(() => reader.close());
  const authenticity = new ReportAuthenticity(core.resolver, config.returnPath.mxHost, log);
  const rules = { softBounceLimit: config.SOFT_BOUNCE_LIMIT };
  const ports = inboundPorts(judge);
  const reports = new InboundReports({ orm, ports, returnPaths: core.returnPaths, hub, rules, reader, authenticity, log });
  // Mail to inbound.<verified domain> is received mail; every other address is the reports' to take or refuse.
  const handler: MxHandler = new ReceivedMail({ orm, ports, hub, reader, maxBytes: config.inbound.receivedMaxBytes, log }, reports);
  try {
    const listener = await startMxListener(
      {
        host: config.HOST,
        port: config.inbound.port,
        maxBytes: config.inbound.maxBytes,
        timeoutSeconds: config.INBOUND_TIMEOUT_SECONDS,
        dataTimeoutSeconds: config.INBOUND_DATA_TIMEOUT_SECONDS,
        sessionTimeoutSeconds: config.INBOUND_SESSION_TIMEOUT_SECONDS,
        maxMessagesPerSession: config.INBOUND_MAX_MESSAGES_PER_SESSION,
        bufferBytes: config.INBOUND_BUFFER_MB * 2 ** 20,
        reportsPerClientPerHour: config.INBOUND_REPORTS_PER_CLIENT_PER_HOUR,
        gate: core.gates.inbound,
        reverseDns: config.SMTP_REVERSE_DNS,
        log,
      },
      handler,
    );
    stops.push(listener.close);
    report({ status: 'listening', port: listener.port });
    log.info({ port: listener.port }, 'inbound MX listening (bounces and feedback reports for return paths, received mail for inbound hosts)');
    if (net.isIP(config.returnPath.mxHost)) {
      log.warn(
        { mxHost: config.returnPath.mxHost },
        "INBOUND_MX_HOST is an IP address (PUBLIC_URL's host?): an MX record must name a host; set INBOUND_MX_HOST",
      );
    }
    return listener.port;
  } catch (err) {
    if (config.inbound.explicit || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    const message =
      `the bounce MX is not listening: port ${config.inbound.port} is taken (another postbox process?); ` +
      'bounces and complaints sent to this process are lost; set INBOUND_SMTP_PORT to choose one, 0 for none';
    log.warn({ port: config.inbound.port }, message);
    report({ status: 'down', port: config.inbound.port, error: message });
    return undefined;
  }
}

/**
 * Records a listener's state for /health and `postbox_listener_up`; one that is down is also said on
 * stderr in plain words, where a person starting the service sees it among the JSON log lines.
 */
function listenerReport(listeners: Map<string, ListenerState>, metrics: Metrics) {
  return (name: string, state: ListenerState) => {
    listeners.set(name, state);
    metrics.listenerUp.set({ listener: name }, state.status === 'listening' ? 1 : 0);
    if (state.status === 'down') process.stderr.write(`postbox: WARNING: ${state.error}\n`);
  };
}

function portInUse(port: number, host: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = net.createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, host, () => probe.close(() => resolve(false)));
  });
}

/**
 * Connects to TEMPORAL_ADDRESS, or brings up the built-in dev server (durable in this service's
 * PostgreSQL by default) on TEMPORAL_DEV_SERVER_PORT; a process that finds that port taken joins the
 * dev server another process of ours already runs there.
 */
async function startTemporal(
  config: Config,
  databaseUrl: string,
  log: Logger,
  stops: Array<() => Promise<void>>,
  metrics: Metrics,
  gates: Pick<Record<Listener, ConnectionGate>, 'temporalGrpc' | 'temporalUi'>,
) {
  let address = config.TEMPORAL_ADDRESS;
  let uiUrl: string | undefined;
  if (!address) {
    const port = config.TEMPORAL_DEV_SERVER_PORT;
    if (port !== 0 && (await portInUse(port, '127.0.0.1'))) {
      address = `127.0.0.1:${port}`;
      log.info({ address }, 'a Temporal dev server already listens there; joining it');
    } else {
      const dev = await startDevServer({
        host: '127.0.0.1',
        port,
        persistence: config.TEMPORAL_DEV_SERVER_PERSISTENCE === 'postgres' ? { kind: 'postgres', url: databaseUrl } : { kind: 'memory' },
        log,
        // The dev server counts its gRPC connections itself; refusals are counted and logged as every listener's.
        maxConnections: gates.temporalGrpc.limits.max,
        maxConnectionsPerClient: gates.temporalGrpc.limits.perClient,
        prefaceTimeoutMs: config.HTTP_HEADERS_TIMEOUT_SECONDS * 1000,
        onConnectionRefused: (reason, client) => gates.temporalGrpc.refused(reason, client),
        ui: config.temporalUiPort
          ? { port: config.temporalUiPort, allowedHosts: config.ALLOWED_HOSTS, guard: (server: net.Server) => gateServer(server, gates.temporalUi) }
          : undefined,
      });
      stops.push(() => dev.stop());
      address = dev.address;
      uiUrl = dev.ui?.url;
      if (uiUrl) log.info({ url: uiUrl }, `Temporal Web UI: ${uiUrl}`);
    }
  }
  const temporal = await connectTemporal({ address, namespace: config.TEMPORAL_NAMESPACE, taskQueue: config.TEMPORAL_TASK_QUEUE, metrics });
  stops.push(() => temporal.close());
  await ensureSearchAttributes(temporal, log);
  log.info({ address, namespace: temporal.namespace }, 'connected to Temporal');
  return { temporal, uiUrl };
}

function parseRole(arg: string | undefined): Role {
  if (arg === undefined || arg === 'all' || arg === 'api' || arg === 'worker') return arg ?? 'all';
  throw new ConfigError(`Unknown role "${arg}": expected all, api or worker`);
}

/** A task queue of this process alone: the service's queue, this host and process, and a random part (a restarted process is a new worker). */
const ownTaskQueue = (taskQueue: string) => `${taskQueue}@${os.hostname()}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;

/**
 * Worker processes polling for campaign chunks now, as Temporal lists them (one identity per process),
 * asked at most every 10 s.
 */
function workersPolling(temporal: TemporalClient): () => Promise<number> {
  let seen: { at: number; count: Promise<number> } | undefined;
  return () => {
    if (seen && Date.now() - seen.at < 10_000) return seen.count;
    const count = temporal.client.workflowService
      .describeTaskQueue({
        namespace: temporal.namespace,
        taskQueue: { name: campaignChunkQueue(temporal.taskQueue), kind: 1 /* NORMAL */ },
        taskQueueType: 2 /* ACTIVITY */,
      })
      .then((res) => Math.max(1, new Set(res.pollers?.map((p) => p.identity)).size));
    seen = { at: Date.now(), count };
    return count;
  };
}

/**
 * A worker is healthy when its SDK worker runs and Temporal lists it among the task queue's pollers
 * with a poll in the last two minutes: proof that it really takes work, not only that it is alive.
 */
async function workerPolls(temporal: TemporalClient, worker: RunningWorker): Promise<void> {
  if (worker.state() !== 'RUNNING') throw new Error(`the Temporal worker is ${worker.state()}`);
  const res = await temporal.client.workflowService.describeTaskQueue({
    namespace: temporal.namespace,
    taskQueue: { name: temporal.taskQueue, kind: 1 /* NORMAL */ },
    taskQueueType: 1 /* WORKFLOW */,
  });
  const mine = res.pollers?.find((p) => p.identity === worker.identity);
  if (!mine) throw new Error(`Temporal lists no poll from this worker (${worker.identity}) on ${temporal.taskQueue}`);
  const last = Number(mine.lastAccessTime?.seconds ?? 0) * 1000;
  if (Date.now() - last > 120_000) throw new Error(`this worker's last poll was ${Math.round((Date.now() - last) / 1000)} s ago`);
}

async function main(): Promise<void> {
  let config: Config;
  let role: Role;
  try {
    role = parseRole(process.argv[2]);
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const log = createLogger(config.LOG_LEVEL);
  const service = await startService(role, config, log);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    // Each step is bounded by SHUTDOWN_TIMEOUT_SECONDS; this bounds them all, should one still hang.
    setTimeout(
      () => {
        log.error({ seconds: config.SHUTDOWN_TIMEOUT_SECONDS + 10 }, 'shutdown did not finish in time; exiting');
        process.exit(1);
      },
      (config.SHUTDOWN_TIMEOUT_SECONDS + 10) * 1000,
    ).unref();
    service.stop().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

if (require.main === module) {
  main().catch((err) => {
    process.stderr.write(`postbox failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
