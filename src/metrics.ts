import type { Knex } from '@mikro-orm/knex';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Orm } from './db/orm';
import type { ContactActivity } from './bus/contact-activity';

// CPU, memory, event loop and GC belong to the process, however many services it runs (tests run several).
let processRegistry: Registry | undefined;
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/**
 * Every Prometheus metric of one running service, in one registry, served as text at GET /metrics
 * (and on METRICS_PORT). Labels take values from small fixed sets: route patterns, workflow and
 * activity types, statuses; never ids or raw paths.
 */
export class Metrics {
  private readonly registry = new Registry();
  readonly contentType = this.registry.contentType;

  readonly httpRequests = new Counter({
    name: 'postbox_http_requests_total',
    help: 'HTTP requests answered, by method, matched route pattern ("unmatched" for none) and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  readonly httpDuration = new Histogram({
    name: 'postbox_http_request_duration_seconds',
    help: 'Time from receiving a request to answering it, by method, matched route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  readonly workflowStarts = new Counter({
    name: 'postbox_workflow_starts_total',
    help: 'Workflow starts (and signal-with-starts) this process asked Temporal for, by workflow type',
    labelNames: ['workflow_type'] as const,
    registers: [this.registry],
  });

  readonly workflowStartFailures = new Counter({
    name: 'postbox_workflow_start_failures_total',
    help: 'Workflow starts Temporal refused or did not answer, by workflow type and error',
    labelNames: ['workflow_type', 'error'] as const,
    registers: [this.registry],
  });

  readonly workflowOutcomes = new Counter({
    name: 'postbox_workflow_outcomes_total',
    help:
      'How workflow runs on this worker ended: completed, failed, cancelled, continued_as_new, or task_failed ' +
      '(an unexpected error; Temporal retries the task)',
    labelNames: ['workflow_type', 'outcome'] as const,
    registers: [this.registry],
  });

  readonly activityDuration = new Histogram({
    name: 'postbox_activity_duration_seconds',
    help: 'Activity attempts run by this worker, by activity type (dispatcher drains last up to two minutes)',
    labelNames: ['activity_type'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  readonly activityFailures = new Counter({
    name: 'postbox_activity_failures_total',
    help: 'Activity attempts that failed (not counting cancellations), by activity type',
    labelNames: ['activity_type'] as const,
    registers: [this.registry],
  });

  readonly emailDeliveries = new Counter({
    name: 'postbox_email_deliveries_total',
    help: 'SMTP outcomes recorded by this worker: sent (accepted), retry (4xx or deferred), failed (5xx)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  readonly emailEvents = new Counter({
    name: 'postbox_email_events_total',
    help: 'email.* events this process committed (email.sent, email.delivery, email.open, email.click, email.bounce, email.complaint)',
    labelNames: ['event'] as const,
    registers: [this.registry],
  });

  readonly listenerUp = new Gauge({
    name: 'postbox_listener_up',
    help: 'Whether each SMTP listener of this process listens (1) or is down because its default port was taken at start (0)',
    labelNames: ['listener'] as const,
    registers: [this.registry],
  });

  readonly connectionsRefused = new Counter({
    name: 'postbox_connections_refused_total',
    help: 'Connections a listener closed on arrival, by listener and reason: total (it held its most) or per_client (that address did)',
    labelNames: ['listener', 'reason'] as const,
    registers: [this.registry],
  });

  constructor(orm: Orm) {
    const pool = () => (orm.em.getConnection().getKnex() as Knex).client.pool;
    new Gauge({
      name: 'postbox_db_pool_connections',
      help: 'Connections of the service’s PostgreSQL pool (DATABASE_POOL_MAX), used or free',
      labelNames: ['state'] as const,
      registers: [this.registry],
      collect() {
        const p = pool();
        this.set({ state: 'used' }, p?.numUsed() ?? 0);
        this.set({ state: 'free' }, p?.numFree() ?? 0);
      },
    });
    new Gauge({
      name: 'postbox_db_pool_pending_acquires',
      help: 'Queries waiting for a connection of the PostgreSQL pool',
      registers: [this.registry],
      collect() {
        this.set(pool()?.numPendingAcquires() ?? 0);
      },
    });
    new Gauge({
      name: 'postbox_db_pool_max_connections',
      help: 'Size limit of the PostgreSQL pool',
      registers: [this.registry],
      collect() {
        this.set(pool()?.max ?? 0);
      },
    });
    new Gauge({
      name: 'postbox_emails_queued',
      help: 'Emails waiting to be sent (status QUEUED), counted in PostgreSQL at each scrape; the same for every process',
      registers: [this.registry],
      async collect() {
        // NaN (unknown), not a stale or zero count, when the database does not answer within 2 s.
        let timer: NodeJS.Timeout | undefined;
        // By entity name: the base imports no module.
        const count = orm.em.fork().count('Email', { status: 'QUEUED' });
        const late = new Promise<number>((resolve) => (timer = setTimeout(() => resolve(NaN), 2000)));
        this.set(await Promise.race([count, late]).catch(() => NaN));
        clearTimeout(timer);
      },
    });
  }

  /** An ActivityHub listener: counts the committed email.* events. */
  readonly countEmailEvents = async (activity: ContactActivity): Promise<void> => {
    for (const e of activity.events) if (e.name.startsWith('email.')) this.emailEvents.inc({ event: e.name });
  };

  /** The text exposition format: the process's metrics, then the service's. */
  async text(): Promise<string> {
    return (await processMetrics().metrics()) + (await this.registry.metrics());
  }
}
