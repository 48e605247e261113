import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { ActivityHub, EventRecord } from '../bus/contact-activity';
import { newId } from '../db/ids';
import { transaction } from '../db/orm';
import { whileUnreachable } from '../db/unreachable';
import { classifySmtpReply } from '../mail/smtp-replies';
import type { DeliveryOutcome, SmtpStep } from '../mail/transport';
import type { Metrics } from '../metrics';
import { addToCampaignCount, markFailed, markSent, type PortSql, scheduleRetries, unclaimRefused } from './delivery.queries';
import type { DeliveryPorts } from './delivery-ports';
import type { DrainReport, QueuedEmail } from './queued-email';

type SmtpVerdict = ReturnType<typeof classifySmtpReply>;

/** How a refusal classifies by its words and the command it answered (the reply code leads nodemailer's `response`). */
const verdictOf = (f: { error: string; step?: SmtpStep }): SmtpVerdict => classifySmtpReply(Number(/^\s*(\d{3})/.exec(f.error)?.[1] ?? 0), f.error, f.step);

/**
 * Soft reasons that speak of the recipient's own mailbox (full, over its size limit, suspended, its owner's filter):
 * a 5xx giving one of these is a Transient bounce, as the same DSN would be. Every other soft reason (blocked,
 * policy, security, relaying, auth, system and network trouble, the server's own size limit) may be about us, our
 * sender or the relay, and one misconfigured relay must never soft-unsubscribe a whole list: those stay FAILED.
 */
const RECIPIENT_SOFT_REASONS = new Set<SmtpVerdict['reason']>(['mailboxfull', 'exceedlimit', 'suspend', 'filtered']);

/** What a 5xx during the session records: a bounce of either type, or a plain failure. */
function bounceTypeOfRefusal(f: { step?: SmtpStep }, verdict: SmtpVerdict): 'Permanent' | 'Transient' | undefined {
  if (verdict.bounceType === 'Permanent') return 'Permanent';
  // Only a refusal of RCPT TO or of the message speaks of the recipient; MAIL FROM is about our sender.
  const aboutRecipient = f.step === 'RCPT' || f.step === 'DATA';
  return verdict.bounceType === 'Transient' && aboutRecipient && RECIPIENT_SOFT_REASONS.has(verdict.reason) ? 'Transient' : undefined;
}

/**
 * How long a living process keeps trying to record outcomes SMTP already gave it while the database is
 * away (a restart, a failover): each message it forgot would be sent again by whoever takes the claim.
 */
const RECORD_RETRY_MS = 60_000;

/** Campaign counters move with the rows that really changed state. */
async function countForCampaigns(em: EntityManager, rows: Array<{ campaign_id: string | null }>, column: 'sent_count' | 'failed_count'): Promise<void> {
  const per = new Map<string, number>();
  for (const r of rows) if (r.campaign_id) per.set(r.campaign_id, (per.get(r.campaign_id) ?? 0) + 1);
  for (const [id, n] of per) await addToCampaignCount(em, id, column, n);
}

/** Backoff for a message the server refused with 4xx: base, 2 × base, 4 × base … capped at 1 h. */
export const retryDelaySeconds = (attempts: number, baseSeconds: number) => Math.min(3600, baseSeconds * 2 ** Math.max(0, attempts - 1));

export interface RecorderDeps {
  orm: MikroORM;
  /** The modules' side: how a refusal is recorded as a bounce, how an event row reads. */
  ports: DeliveryPorts;
  /** The ports' SQL, built once with the engine. */
  sql: PortSql;
  log: Logger;
  /** Told about every committed event (segments, automations react to them). */
  hub?: ActivityHub;
  metrics?: Metrics;
  /** First delay after a 4xx reply (EMAIL_RETRY_BASE_SECONDS). */
  retryBaseSeconds?: number;
  /** SOFT_BOUNCE_LIMIT: soft refusals in a row that unsubscribe a contact; 0 (the default here) never does. */
  softBounceLimit?: number;
}

/** One message's outcome on its way to the database, with the delivery it belongs to. */
export interface Outcome {
  email: QueuedEmail;
  outcome: Exclude<DeliveryOutcome, { kind: 'unreachable' }>;
  /** The subject a campaign draft was rendered with, recorded with the outcome. */
  subject?: string;
  /** The delivery's counts, moved once the outcome is committed. */
  report: DrainReport;
  /** The delivery's activity heartbeat, for while the database is away. */
  heartbeat: () => void;
}

/**
 * Records delivery outcomes in groups as they arrive, for every delivery of the process (drains and
 * campaign chunks alike): while one group's statements run, the next one collects, so however many
 * deliveries run at once PostgreSQL sees a few large statements rather than many small ones. `record`
 * resolves once the outcome is committed, or rejects with the error that kept it from being.
 */
export class OutcomeRecorder {
  private waiting: Array<{ item: Outcome; resolve: () => void; reject: (err: unknown) => void }> = [];
  private running = false;

  constructor(private readonly deps: RecorderDeps) {}

  /** A group's statements, tried again while the database is away (each outcome forgotten would be sent twice). */
  private write(items: Outcome[]): Promise<void> {
    return whileUnreachable(() => recordOutcomes(this.deps, items), {
      forMs: RECORD_RETRY_MS,
      waiting: (err, attempt) => {
        if (attempt === 1) this.deps.log.warn({ err }, 'recording delivery outcomes failed; trying again until the database is back');
        for (const item of items) item.heartbeat();
      },
    });
  }

  record(item: Outcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.running) void this.run();
    });
  }

  private async run(): Promise<void> {
    this.running = true;
    while (this.waiting.length) {
      const group = this.waiting;
      this.waiting = [];
      try {
        await this.write(group.map((g) => g.item));
        for (const g of group) g.resolve();
      } catch (err) {
        for (const g of group) g.reject(err);
      }
    }
    this.running = false;
  }
}

/**
 * One transaction for the whole batch, one statement per outcome kind, each writing the attempt it
 * records (a campaign's mail is not claimed, so this is where its count moves). Only rows still QUEUED change,
 * and `email.sent` is written only for those, so a batch recorded twice records nothing twice.
 */
async function recordOutcomes(deps: RecorderDeps, items: Outcome[]): Promise<void> {
  if (items.length === 0) return;
  const of = <K extends Outcome['outcome']['kind']>(kind: K) =>
    items.flatMap((i) => (i.outcome.kind === kind ? [{ ...i, outcome: i.outcome as Extract<DeliveryOutcome, { kind: K }> }] : []));
  const sent = of('sent');
  const projectOf = new Map(items.map((i) => [i.email.contact_id, i.email.project_id]));
  const retry = of('retry');
  // A 5xx that says the address does not exist (or no longer takes mail) is a hard bounce, as a DSN saying so would be;
  // one that says the recipient's mailbox is full or suspended is a soft one.
  const rejections = of('failed').map((f) => {
    const verdict = verdictOf(f.outcome);
    return { ...f, verdict, bounceType: bounceTypeOfRefusal(f.outcome, verdict) };
  });
  const bounced = rejections.flatMap((f) => (f.bounceType ? [{ ...f, bounceType: f.bounceType }] : []));
  const failed = rejections.filter((f) => !f.bounceType);
  const write = async (tx: EntityManager): Promise<EventRecord[]> => {
    const recorded = sent.length ? await recordSent(tx, deps, sent) : [];
    if (bounced.length) recorded.push(...(await recordRejectedForGood(tx, deps.ports, bounced, { softBounceLimit: deps.softBounceLimit ?? 0 })));
    if (retry.length) {
      await scheduleRetries(
        tx,
        retry.map((r) => ({
          id: r.email.id,
          attempts: r.email.attempts,
          delay: retryDelaySeconds(r.email.attempts, deps.retryBaseSeconds ?? 30),
          error: r.outcome.error,
        })),
      );
    }
    if (failed.length) {
      const failedRows = await markFailed(
        tx,
        failed.map((f) => ({ id: f.email.id, attempts: f.email.attempts, error: f.outcome.error })),
      );
      await countForCampaigns(tx, failedRows, 'failed_count');
    }
    return recorded;
  };
  // Accepted mail alone (nearly always) is one statement, atomic by itself: no transaction's extra round trips.
  const em = deps.orm.em.fork();
  const recorded = retry.length || rejections.length ? await transaction(em, write) : await write(em);
  for (const i of sent) i.report.sent++;
  for (const i of retry) i.report.retried++;
  for (const i of rejections) i.report.failed++;
  deps.metrics?.emailDeliveries.inc({ outcome: 'sent' }, sent.length);
  deps.metrics?.emailDeliveries.inc({ outcome: 'retry' }, retry.length);
  deps.metrics?.emailDeliveries.inc({ outcome: 'failed' }, rejections.length);
  for (const [projectId, events] of Map.groupBy(recorded, (e) => projectOf.get(e.contactId)!)) {
    deps.hub?.publish({ projectId, contactIds: [], events });
  }
}
/**
 * Mail the relay (or the receiving MX through it) refused for good during the SMTP session, for a reason about the
 * recipient: recorded as a bounce through the path every provider's report takes, so the email is BOUNCED and its
 * campaign counts it instead of a plain FAILED. A Permanent one unsubscribes the contact; a Transient one counts
 * toward SOFT_BOUNCE_LIMIT, as a soft DSN does.
 */
async function recordRejectedForGood(
  tx: EntityManager,
  ports: DeliveryPorts,
  bounced: Array<{ email: QueuedEmail; outcome: { error: string }; verdict: SmtpVerdict; bounceType: 'Permanent' | 'Transient' }>,
  rules: { softBounceLimit: number },
): Promise<EventRecord[]> {
  const events: EventRecord[] = [];
  const still = await unclaimRefused(
    tx,
    bounced.map((b) => ({ id: b.email.id, attempts: b.email.attempts, error: b.outcome.error })),
  );
  const queued = new Set(still.map((r) => r.id));
  for (const b of bounced.filter((x) => queued.has(x.email.id))) {
    const details = {
      bounceSubType: b.verdict.subType,
      reason: b.verdict.reason,
      status: b.verdict.status,
      diagnosticCode: b.outcome.error.slice(0, 1000),
      source: 'smtp',
    };
    const bounce = { bounceType: b.bounceType, details: Object.fromEntries(Object.entries(details).filter(([, v]) => v !== null)) };
    events.push(...(await ports.recordRefusal(tx, b.email.id, bounce, rules)));
  }
  return events;
}
/**
 * Accepted mail in one statement: each email still unsent becomes SENT, its campaign counts it, and its
 * `email.sent` event is written, only for the rows that really changed (so recording twice records once).
 */
async function recordSent(
  em: EntityManager,
  deps: RecorderDeps,
  sent: Array<Outcome & { outcome: Extract<DeliveryOutcome, { kind: 'sent' }> }>,
): Promise<EventRecord[]> {
  const rows = await markSent(
    em,
    deps.sql,
    sent.map(({ email: e, outcome, subject }) => ({
      id: e.id,
      attempts: e.attempts,
      providerMessageId: outcome.providerMessageId,
      subject: subject ?? null,
      eventId: newId(),
      data: JSON.stringify({
        emailId: e.id,
        messageId: e.message_id,
        templateId: e.template_id,
        campaignId: e.campaign_id,
        ...(e.variant_id ? { variantId: e.variant_id } : {}),
      }),
    })),
  );
  return rows.map((row) => deps.ports.toEventRecord(row));
}
