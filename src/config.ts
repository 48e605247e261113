import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import type { ConnectionLimits } from './net/connection-limits';

const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no', '']).transform((v) => v === 'true' || v === '1' || v === 'yes');

const port = z.coerce.number().int().min(0).max(65535);

const hostPort = z.string().regex(/^[^\s:,]+(:\d{1,5})?$/, 'expected host[:port]');

const urlWithScheme = (schemes: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return schemes.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    `expected a URL with scheme ${schemes.join(' or ')}`,
  );

/** Every setting of the service, read once from the environment. Names are a public contract. */
const envSchema = z.object({
  PORT: port.default(8080),
  /** Loopback by default: `npm start` on a laptop or a shared network exposes nothing; the container image sets 0.0.0.0. */
  HOST: z.string().min(1).default('127.0.0.1'),
  /** GET /metrics on a listener of its own (on HOST), for Prometheus on a private network; the API port serves it only with METRICS_TOKEN. */
  METRICS_PORT: port.optional(),
  /** A bearer token: GET /metrics on the API port answers only with it, and METRICS_PORT then requires it too. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** Read X-Forwarded-Proto/-Host/-For (only behind a reverse proxy that sets them; otherwise any client could). */
  TRUST_PROXY: bool.default(false),
  /** On SIGTERM, how long in-flight requests and running activities get to finish before they are cut off. */
  SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  /** On SIGTERM, how long the API keeps accepting connections (with /health at 503) before it closes its listener. */
  SHUTDOWN_DRAIN_SECONDS: z.coerce.number().min(0).max(300).default(2),
  PUBLIC_URL: urlWithScheme(['http:', 'https:']).optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  DATABASE_URL: urlWithScheme(['postgres:', 'postgresql:']).optional(),
  EMBEDDED_POSTGRES_PORT: port.optional(),
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(500).optional(),
  TEMPORAL_ADDRESS: hostPort.optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_DEV_SERVER_PORT: port.default(7233),
  /** Where the built-in dev server keeps its state: the service's PostgreSQL (durable) or memory. */
  TEMPORAL_DEV_SERVER_PERSISTENCE: z.enum(['postgres', 'memory']).default('postgres'),
  /** Connections the built-in dev server's gRPC port holds at once, and from one client address (past either: closed). */
  TEMPORAL_DEV_SERVER_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100_000).default(256),
  TEMPORAL_DEV_SERVER_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(1).max(100_000).default(64),
  /** The Temporal Web UI beside the built-in dev server (http://127.0.0.1:TEMPORAL_UI_PORT). */
  TEMPORAL_UI: z.enum(['on', 'off']).default('on'),
  /** Default TEMPORAL_DEV_SERVER_PORT + 1000 (8233), none when that port is 0; 0 turns the UI off. */
  TEMPORAL_UI_PORT: port.optional(),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('postbox'),
  /** Workflow executions a worker keeps in memory between tasks; the rest are replayed from history when they wake. */
  TEMPORAL_MAX_CACHED_WORKFLOWS: z.coerce.number().int().min(0).max(100_000).default(500),
  SMTP_URL: urlWithScheme(['smtp:', 'smtps:']).optional(),
  DEV_SMTP_PORT: port.default(0),
  /** Domain whose SPF record authorises our sending host (`include:<it>`); default `a:<SMTP or public host>`. */
  SPF_INCLUDE: z
    .string()
    .regex(/^[a-z0-9.-]+$/i, 'expected a domain name')
    .optional(),
  /** Recipients per delivery activity of a campaign send (a chunk). */
  CAMPAIGN_BATCH_SIZE: z.coerce.number().int().min(1).max(5000).default(500),
  /** Campaign chunks each worker process delivers at once; a campaign has this many in flight per worker polling (docs/performance.md). */
  CAMPAIGN_CHUNKS_PER_WORKER: z.coerce.number().int().min(1).max(64).default(4),
  /** Background refresh of each segment's count, and recompute of tracked memberships (time-based conditions). */
  SEGMENT_REFRESH_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  DOMAIN_CHECK_INTERVAL_SECONDS: z.coerce.number().int().min(1).max(86_400).default(300),
  /** Email dispatchers of each worker process (`email-dispatch:<its queue>:<n>`); all of them share the outgoing queue. */
  EMAIL_DISPATCHERS: z.coerce.number().int().min(1).max(64).default(2),
  /** First retry delay after an SMTP 4xx reply; doubles on each attempt, at most one hour. */
  EMAIL_RETRY_BASE_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  /** Standing `automation-dispatch:<n>` executions that turn recorded events into automation starts and wake-ups. */
  AUTOMATION_DISPATCHERS: z.coerce.number().int().min(1).max(64).default(1),
  /** Standing executions sending webhook deliveries (each sends to every endpoint, one endpoint's at a time per drain). */
  WEBHOOK_DISPATCHERS: z.coerce.number().int().min(1).max(64).default(1),
  /** Seconds before a failed webhook delivery's first retry; each later one waits six times longer (capped at 12 h). */
  WEBHOOK_RETRY_BASE_SECONDS: z.coerce.number().positive().max(3600).default(5),
  /** How long a dispatcher's drain activity waits for more work before its execution sleeps (until signalled). */
  DISPATCH_IDLE_SECONDS: z.coerce.number().int().min(1).max(600).default(10),
  /** Let WEBHOOK steps call private, loopback and metadata addresses (tests, private deployments). */
  WEBHOOK_ALLOW_PRIVATE: bool.default(false),
  /**
   * SMTP connections per worker process. 16, not 8: with 8, delivery waited on round trips and outcome
   * commits with the cores not full (chosen by measurement: docs/performance.md).
   */
  SMTP_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(16),
  /** SMTP submission for applications (AUTH with a project's secret key), default 2587; 0 turns it off. */
  SMTP_SUBMISSION_PORT: port.optional(),
  /** Default: HOST. */
  SMTP_SUBMISSION_HOST: z.string().min(1).optional(),
  /** PEM certificate chain and key: STARTTLS on SMTP_SUBMISSION_PORT; re-read when the files change. */
  SMTP_SUBMISSION_TLS_CERT: z.string().min(1).optional(),
  SMTP_SUBMISSION_TLS_KEY: z.string().min(1).optional(),
  /** Implicit TLS (the port-465 style) on this port; needs the certificate. */
  SMTP_SUBMISSION_TLS_PORT: port.optional(),
  /** Let clients authenticate without TLS from anywhere (loopback always may): only behind a TLS-terminating proxy or on a private network. */
  SMTP_SUBMISSION_ALLOW_INSECURE_AUTH: bool.default(false),
  /** An SMTP connection idle this long is closed. */
  SMTP_SUBMISSION_IDLE_SECONDS: z.coerce.number().int().min(1).max(3600).default(300),
  /** A submission connection that has not authenticated this long after connecting is closed (421). */
  SMTP_SUBMISSION_AUTH_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(30),
  /** Connections SMTP submission holds at once, and from one client address (past either: 421). */
  SMTP_SUBMISSION_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100_000).default(256),
  SMTP_SUBMISSION_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(1).max(100_000).default(32),
  /** Look SMTP clients' addresses up in reverse DNS (their names appear in Received: headers); off, each is its address. */
  SMTP_REVERSE_DNS: bool.default(false),
  /** The MX for bounces and complaints: SMTP for the return-path and feedback-loop addresses only, default 2525; 0 turns it off. */
  INBOUND_SMTP_PORT: port.optional(),
  /** The largest message the inbound MX takes (a bounce carrying back a large original is cut there). */
  INBOUND_MAX_MB: z.coerce.number().positive().max(100).default(10),
  /** Connections the inbound MX holds at once, and from one client address (past either: 421). */
  INBOUND_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100_000).default(256),
  INBOUND_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(1).max(100_000).default(16),
  /** An inbound connection must reach DATA this long after connecting or after its previous message, or is closed (421); also its idle limit. */
  INBOUND_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(60),
  /** A message's DATA at the inbound MX must end this long after it began, or the connection is closed (421). */
  INBOUND_DATA_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(120),
  /** An inbound connection is closed (421) this long after it connected, whatever it is doing. */
  INBOUND_SESSION_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(86_400).default(600),
  /** Messages one inbound connection may send; the next MAIL FROM is 421 and the connection closed. */
  INBOUND_MAX_MESSAGES_PER_SESSION: z.coerce.number().int().min(1).max(10_000).default(20),
  /** Message data all inbound connections together may hold in memory at once; a message past it is 452 (the sender retries). */
  INBOUND_BUFFER_MB: z.coerce.number().positive().max(4096).default(64),
  /** Messages the inbound MX takes from one client (an IPv4 address, an IPv6 /64) an hour, per process; then 450. */
  INBOUND_REPORTS_PER_CLIENT_PER_HOUR: z.coerce.number().int().min(1).default(1000),
  /** The host sender domains point their return-path MX record at; default: PUBLIC_URL's host. */
  INBOUND_MX_HOST: z
    .string()
    .regex(/^[a-z0-9.-]+$/i, 'expected a host name')
    .optional(),
  /** Return paths are <token>@<prefix>.<sender domain>. */
  RETURN_PATH_PREFIX: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i, 'expected one DNS label')
    .default('bounces')
    .refine((v) => v.toLowerCase() !== 'inbound', 'inbound.<domain> is the inbound host (received mail); choose another label'),
  /** The largest received message (mail to an inbound.<domain> address) that is stored; above it the MX answers 552. */
  INBOUND_EMAIL_MAX_MB: z.coerce.number().positive().max(100).default(10),
  /** Received messages are kept this long, then purged by the maintenance schedule. */
  INBOUND_EMAIL_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** Soft bounces in a row (separate emails, no delivery, open or click between) that unsubscribe a contact; 0 never does. */
  SOFT_BOUNCE_LIMIT: z.coerce.number().int().min(0).max(1000).default(5),
  /** Connections the HTTP API holds at once; more are closed as they arrive. */
  HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(100_000).default(1024),
  /** Connections the HTTP API holds from one client address. Unset: 256, or HTTP_MAX_CONNECTIONS with TRUST_PROXY (the proxy is the client). */
  HTTP_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(1).max(100_000).optional(),
  /** A connection that has not sent a whole request head this long after connecting (or after starting its next one) is closed (408). */
  HTTP_HEADERS_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(600).default(10),
  /** Names the Web UI and the dev mailbox answer to besides 127.0.0.1, localhost and [::1] (host or host:port, comma-separated). */
  ALLOWED_HOSTS: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim().toLowerCase())
            .filter(Boolean)
        : [],
    )
    .pipe(z.array(z.string().regex(/^(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(:\d{1,5})?$/, 'expected host or host:port names, comma-separated'))),
  /**
   * Messages a worker process may have handed to SMTP whose outcome is not yet recorded: what a killed
   * process can send twice. Unset: 4 × SMTP_POOL_SIZE, so connections keep sending while outcomes commit.
   */
  DELIVERY_IN_FLIGHT: z.coerce.number().int().min(1).max(10_000).optional(),
  /**
   * Delivery threads per worker process (render campaign mail, encode, sign, SMTP), sharing SMTP_POOL_SIZE;
   * 0 delivers on the main thread. Unset: `defaultMailThreads` of this machine's cores.
   */
  MAIL_THREADS: z.coerce.number().int().min(0).max(64).optional(),
  ATTACHMENTS_MAX_MB: z.coerce.number().positive().max(40).default(10),
  MESSAGE_MAX_MB: z.coerce.number().positive().max(100).default(40),
  /** Hosts SNS signing certificates and subscription URLs may come from; `*` is one DNS label. */
  SNS_CERT_HOSTS: z
    .string()
    .default('sns.*.amazonaws.com')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  /** Topics SES notifications may come from (comma-separated ARNs); unset, any topic whose message is signed by SNS. */
  SNS_TOPIC_ARNS: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : undefined,
    ),
  DNS_SERVERS: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    )
    .pipe(z.array(hostPort)),
  JWT_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  DISABLE_SIGNUP: bool.default(false),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  IDEMPOTENCY_TTL_HOURS: z.coerce
    .number()
    .positive()
    .max(24 * 365)
    .default(24),
  RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(1000),
  /** Public-key requests (the form, /v1/track) per project per minute: a budget apart from the secret key's. */
  PUBLIC_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(1000),
  /** Public-key requests per client address (/64 for IPv6) per project per minute, checked before the project's public budget. */
  PUBLIC_RATE_LIMIT_PER_CLIENT_PER_MINUTE: z.coerce.number().int().min(1).default(120),
  /** How long a double opt-in confirmation link works; a subscription left pending longer becomes unsubscribed. */
  CONFIRMATION_EXPIRY_HOURS: z.coerce
    .number()
    .positive()
    .max(24 * 30)
    .default(72),
  MAX_BODY_MB: z.coerce.number().positive().max(100).default(40),
  /** Sender of the service's own mail to users (verification, password reset); default postbox@<PUBLIC_URL host>. */
  SYSTEM_EMAIL_FROM: z.email().optional(),
  /** POST /uploads/image: the largest image accepted. */
  UPLOAD_MAX_MB: z.coerce.number().positive().max(100).default(5),
  /** Uploads go to this S3-compatible bucket (with the S3_* settings below) instead of DATA_DIR. */
  S3_BUCKET: z.string().min(1).optional(),
  /** The bucket's endpoint, addressed path-style: https://s3.<region>.amazonaws.com, http://minio:9000, ... */
  S3_ENDPOINT: urlWithScheme(['http:', 'https:']).optional(),
  S3_REGION: z.string().min(1).default('us-east-1'),
  S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  /** The session token of temporary credentials (an assumed IAM role, STS), with their key id and secret. */
  S3_SESSION_TOKEN: z.string().min(1).optional(),
  /** Public base URL of the bucket's objects; unset, the service serves them at PUBLIC_URL/uploads/... */
  S3_PUBLIC_URL: urlWithScheme(['http:', 'https:']).optional(),
  /** How often the activity-counts schedule folds count deltas into the hourly and daily counts (its interval). */
  ACTIVITY_FOLD_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
  /** Bounce and complaint rates are judged over this many days (of mail sent since the last review). */
  SECURITY_WINDOW_DAYS: z.coerce.number().positive().max(90).default(7),
  /** Emails sent in the window before a rate can suspend a project. */
  SECURITY_MIN_SENT: z.coerce.number().int().min(1).default(100),
  /** Permanent bounces per email sent above which a project is suspended (1 never suspends). */
  SECURITY_BOUNCE_RATE: z.coerce.number().min(0).max(1).default(0.1),
  /** Complaints per email sent above which a project is suspended (1 never suspends). */
  SECURITY_COMPLAINT_RATE: z.coerce.number().min(0).max(1).default(0.005),
  /** Recipient domains the counted complaints must come from before their rate can suspend a project. */
  SECURITY_MIN_COMPLAINT_DOMAINS: z.coerce.number().int().min(1).default(3),
  /** Billing: payment calls go to Stripe only when this is set. */
  STRIPE_SECRET_KEY: z.string().min(1).optional(),
  /** Signing secret of the Stripe webhook endpoint (POST /webhooks/incoming/stripe). */
  STRIPE_WEBHOOK_SECRET: z.string().min(1).optional(),
  /** The price a checkout subscribes to. */
  STRIPE_PRICE_ID: z.string().min(1).optional(),
  /** Base URL of the Stripe API (tests point it at a local fake). */
  STRIPE_API_BASE: urlWithScheme(['http:', 'https:']).default('https://api.stripe.com'),
});

export type Role = 'all' | 'api' | 'worker';

export type Config = z.output<typeof envSchema> & {
  publicUrl: string;
  dataDir: string;
  /** The SPF record every sender domain is asked to publish. */
  spfValue: string;
  /** SYSTEM_EMAIL_FROM or its default. */
  systemEmailFrom: string;
  /**
   * SMTP_SUBMISSION_PORT or 2587 (0: off). `explicit` when it was set: a port taken is then an error;
   * the default port taken (by another process of ours on this machine) only leaves this one without it.
   */
  submission: { port: number; explicit: boolean };
  /** ATTACHMENTS_MAX_MB and MESSAGE_MAX_MB in bytes: what /v1/send and SMTP submission accept. */
  sendLimits: { attachmentsMaxBytes: number; messageMaxBytes: number };
  /** DELIVERY_IN_FLIGHT or its default, 4 × SMTP_POOL_SIZE. */
  deliveryInFlight: number;
  /** MAIL_THREADS or its default, `defaultMailThreads` of this machine's cores. */
  mailThreads: number;
  /** DATABASE_POOL_MAX or its default, `defaultPoolMax` of this machine's cores. */
  databasePoolMax: number;
  /** Port of the Temporal Web UI next to the built-in dev server; undefined when it is off. */
  temporalUiPort?: number;
  /** Every listener's connection limits as configured (`fitToFileLimit` may lower them at start). */
  connectionLimits: Record<Listener, ConnectionLimits>;
  /** INBOUND_SMTP_PORT or 2525 (0: off); `explicit` as for `submission`. */
  inbound: { port: number; explicit: boolean; maxBytes: number; receivedMaxBytes: number };
  /** What sender domains publish for their return paths: `<prefix>.<domain>` MX to `mxHost`, and our SPF there. */
  returnPath: { prefix: string; mxHost: string; spfValue: string };
  /** The SECURITY_* settings, as sending security judges a project by them. */
  security: { windowDays: number; minSent: number; bounceRate: number; complaintRate: number; minComplaintDomains: number };
};

/** The listeners a process may open, each with its own connection limits. */
export type Listener = 'http' | 'submission' | 'inbound' | 'temporalGrpc' | 'temporalUi' | 'metrics' | 'devSmtp';

/** The Web UI, metrics and dev mailbox listeners serve an operator, Prometheus and this service: fixed, small limits. */
export const FIXED_CONNECTION_LIMITS = {
  temporalUi: { max: 128, perClient: 64 },
  metrics: { max: 32, perClient: 8 },
  devSmtp: { max: 256, perClient: 256 },
} satisfies Partial<Record<Listener, ConnectionLimits>>;

export class ConfigError extends Error {}

/**
 * Connections per process when DATABASE_POOL_MAX is unset: 3 per core, at least 6 and at most 20. More
 * connections than a few per core only add backends taking turns on the same cores, costing PostgreSQL
 * more per request and delivering no faster (docs/performance.md).
 */
export const defaultPoolMax = (cores: number) => Math.min(20, Math.max(6, 3 * cores));

/**
 * A delivery thread for every four cores, at least one. A thread does a small part of a message's CPU,
 * so a machine whose cores all deliver needs about cores / 4 of them; each costs its own V8 heap, and on
 * 2 cores a second one delivered no faster (docs/performance.md). Larger machines are not measured.
 */
export const defaultMailThreads = (cores: number) => Math.max(1, Math.floor(cores / 4));

/** Parses the environment; the error names the first bad variable in one line. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // Treat empty strings as unset so `FOO= npm start` behaves like no FOO at all.
  const cleaned = Object.fromEntries(Object.entries(env).filter(([k, v]) => k in envSchema.shape && v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid configuration: ${name}: ${issue.message}`);
  }
  const cfg = parsed.data;
  if (cfg.S3_BUCKET) {
    const missing = (['S3_ENDPOINT', 'S3_ACCESS_KEY_ID', 'S3_SECRET_ACCESS_KEY'] as const).find((k) => !cfg[k]);
    if (missing) throw new ConfigError(`Invalid configuration: ${missing}: required when S3_BUCKET is set`);
  }
  const publicUrl = (cfg.PUBLIC_URL ?? `http://localhost:${cfg.PORT}`).replace(/\/+$/, '');
  const sendingHost = cfg.SMTP_URL ? new URL(cfg.SMTP_URL).hostname : new URL(publicUrl).hostname;
  const spfValue = `v=spf1 ${cfg.SPF_INCLUDE ? `include:${cfg.SPF_INCLUDE}` : `a:${sendingHost}`} ~all`;
  const systemEmailFrom = cfg.SYSTEM_EMAIL_FROM ?? `postbox@${new URL(publicUrl).hostname}`;
  const devPort = cfg.TEMPORAL_DEV_SERVER_PORT;
  const temporalUiPort = cfg.TEMPORAL_UI === 'off' ? undefined : (cfg.TEMPORAL_UI_PORT ?? (devPort ? devPort + 1000 : undefined)) || undefined;
  if (temporalUiPort !== undefined && temporalUiPort > 65535) {
    throw new ConfigError(`Invalid configuration: TEMPORAL_UI_PORT: TEMPORAL_DEV_SERVER_PORT + 1000 is over 65535; set TEMPORAL_UI_PORT`);
  }
  if (Boolean(cfg.SMTP_SUBMISSION_TLS_CERT) !== Boolean(cfg.SMTP_SUBMISSION_TLS_KEY)) {
    throw new ConfigError(
      `Invalid configuration: ${cfg.SMTP_SUBMISSION_TLS_CERT ? 'SMTP_SUBMISSION_TLS_KEY' : 'SMTP_SUBMISSION_TLS_CERT'}` +
        `: the certificate and its key are set together`,
    );
  }
  if (cfg.SMTP_SUBMISSION_TLS_PORT !== undefined && !cfg.SMTP_SUBMISSION_TLS_CERT) {
    throw new ConfigError('Invalid configuration: SMTP_SUBMISSION_TLS_PORT: needs SMTP_SUBMISSION_TLS_CERT and SMTP_SUBMISSION_TLS_KEY');
  }
  const deliveryInFlight = cfg.DELIVERY_IN_FLIGHT ?? 4 * cfg.SMTP_POOL_SIZE;
  const databasePoolMax = cfg.DATABASE_POOL_MAX ?? defaultPoolMax(os.availableParallelism());
  const mailThreads = cfg.MAIL_THREADS ?? defaultMailThreads(os.availableParallelism());
  const sendLimits = { attachmentsMaxBytes: cfg.ATTACHMENTS_MAX_MB * 2 ** 20, messageMaxBytes: cfg.MESSAGE_MAX_MB * 2 ** 20 };
  const submission = { port: cfg.SMTP_SUBMISSION_PORT ?? 2587, explicit: cfg.SMTP_SUBMISSION_PORT !== undefined };
  const connectionLimits: Record<Listener, ConnectionLimits> = {
    ...FIXED_CONNECTION_LIMITS,
    http: { max: cfg.HTTP_MAX_CONNECTIONS, perClient: cfg.HTTP_MAX_CONNECTIONS_PER_CLIENT ?? (cfg.TRUST_PROXY ? cfg.HTTP_MAX_CONNECTIONS : 256) },
    submission: { max: cfg.SMTP_SUBMISSION_MAX_CONNECTIONS, perClient: cfg.SMTP_SUBMISSION_MAX_CONNECTIONS_PER_CLIENT },
    inbound: { max: cfg.INBOUND_MAX_CONNECTIONS, perClient: cfg.INBOUND_MAX_CONNECTIONS_PER_CLIENT },
    temporalGrpc: { max: cfg.TEMPORAL_DEV_SERVER_MAX_CONNECTIONS, perClient: cfg.TEMPORAL_DEV_SERVER_MAX_CONNECTIONS_PER_CLIENT },
  };
  const inbound = {
    port: cfg.INBOUND_SMTP_PORT ?? 2525,
    explicit: cfg.INBOUND_SMTP_PORT !== undefined,
    maxBytes: cfg.INBOUND_MAX_MB * 2 ** 20,
    // What the MX takes at all bounds what it can store.
    receivedMaxBytes: Math.floor(Math.min(cfg.INBOUND_EMAIL_MAX_MB, cfg.INBOUND_MAX_MB) * 2 ** 20),
  };
  const returnPath = { prefix: cfg.RETURN_PATH_PREFIX.toLowerCase(), mxHost: (cfg.INBOUND_MX_HOST ?? new URL(publicUrl).hostname).toLowerCase(), spfValue };
  return {
    ...cfg,
    publicUrl,
    dataDir: path.resolve(cfg.DATA_DIR),
    spfValue,
    systemEmailFrom,
    temporalUiPort,
    deliveryInFlight,
    mailThreads,
    databasePoolMax,
    sendLimits,
    submission,
    connectionLimits,
    inbound,
    returnPath,
    security: {
      windowDays: cfg.SECURITY_WINDOW_DAYS,
      minSent: cfg.SECURITY_MIN_SENT,
      bounceRate: cfg.SECURITY_BOUNCE_RATE,
      complaintRate: cfg.SECURITY_COMPLAINT_RATE,
      minComplaintDomains: cfg.SECURITY_MIN_COMPLAINT_DOMAINS,
    },
  };
}
