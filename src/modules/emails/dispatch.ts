import crypto from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { sql } from '../../db/orm';
import { whileUnreachable } from '../../db/unreachable';
import { DrainBell, type QueueSignal } from '../../db/work-queue';
import type { DkimKey } from '../../mail/dkim';
import { classifySmtpReply } from '../../inbound/bounce-report';
import type { ReturnPaths } from '../../inbound/return-path';
import { recordEmailActivity } from './email-activity';
import { returnPathVerified } from '../domains';
import type { DomainRow } from '../domains';
import type { MessageSender } from '../../mail/delivery-threads';
import type { OutgoingMessage } from '../../mail/mime';
import type { DeliveryOutcome } from '../../mail/transport';
import type { ActivityHub } from '../../bus/contact-activity';
import { type EventRecord, type EventRow, toEventRecord } from '../events';
import { newId } from '../../db/ids';
import type { Metrics } from '../../metrics';
import { projectSettings, type ProjectSettings, type TrackingOverride } from '../accounts';
import type { DraftMessage } from '../../mail/compose';
import type { EmailType } from './emails.service';

export interface QueuedEmail {
  id: string;
  project_id: string;
  contact_id: string;
  template_id: string | null;
  campaign_id: string | null;
  from_email: string;
  from_name: string | null;
  reply_to: string | null;
  to_email: string;
  to_name: string | null;
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  message_id: string;
  attempts: number;
}

interface Attachment {
  email_id: string;
  filename: string;
  content_type: string;
  content_id: string | null;
  disposition: 'attachment' | 'inline';
  content: Buffer;
}

/** What delivery reads of a queued email (`QueuedEmail` but its `attempts`), from `emails e`. */
const QUEUED_COLUMNS = `e.id, e.project_id, e.contact_id, e.template_id, e.campaign_id, e.from_email, e.from_name, e.reply_to,
       e.to_email, e.to_name, e.subject, e.html, e.text, e.headers, e.message_id`;

type SmtpVerdict = ReturnType<typeof classifySmtpReply>;

/** How a refusal's words classify (the reply code leads nodemailer's `response`). */
const verdictOf = (error: string): SmtpVerdict => classifySmtpReply(Number(/^\s*(\d{3})/.exec(error)?.[1] ?? 0), error);

/** `<project id>:<sender domain>`: whose DKIM key signs this email. */
const senderOf = (e: QueuedEmail) => `${e.project_id}:${e.from_email.slice(e.from_email.lastIndexOf('@') + 1)}`;

/** Recipients of a campaign by contact id: after `after` (null: from the first), up to and with `upTo`. */
export interface CampaignChunk {
  after: string | null;
  upTo: string;
}

export interface DrainReport {
  sent: number;
  retried: number;
  failed: number;
}

/** Thrown when the SMTP server cannot be reached: the drain activity fails and Temporal retries it with backoff. */
export class SmtpUnavailableError extends Error {}

/**
 * A claim's lifetime when its owner never comes back to take it (its execution was terminated): the
 * normal takeover after a crash is the owner's retried activity, one heartbeat timeout (20 s) later.
 */
export const CLAIM_SECONDS = 120;

/** A campaign recipient's message, rendered by whoever encodes it. */
type Draft = DraftMessage['compose'];

/**
 * How long a living process keeps trying to record outcomes SMTP already gave it while the database is
 * away (a restart, a failover): each message it forgot would be sent again by whoever takes the claim.
 */
const RECORD_RETRY_MS = 60_000;

/** Campaign counters move with the rows that really changed state. */
async function countForCampaigns(em: EntityManager, rows: Array<{ campaign_id: string | null }>, column: 'sent_count' | 'failed_count'): Promise<void> {
  const per = new Map<string, number>();
  for (const r of rows) if (r.campaign_id) per.set(r.campaign_id, (per.get(r.campaign_id) ?? 0) + 1);
  for (const [id, n] of per) await sql(em, `UPDATE campaigns SET ${column} = ${column} + ?, updated_at = now() WHERE id = ?`, [n, id]);
}

/** Backoff for a message the server refused with 4xx: base, 2 × base, 4 × base … capped at 1 h. */
export const retryDelaySeconds = (attempts: number, baseSeconds: number) => Math.min(3600, baseSeconds * 2 ** Math.max(0, attempts - 1));

export interface DispatcherDeps {
  orm: MikroORM;
  sender: MessageSender;
  queue: QueueSignal;
  log: Logger;
  /** Told about every committed event (segments, automations react to them). */
  hub?: ActivityHub;
  batchSize?: number;
  /** Send slots; each holds at most one message SMTP accepted whose outcome is not yet recorded. */
  concurrency?: number;
  /** First delay after a 4xx reply (EMAIL_RETRY_BASE_SECONDS). */
  retryBaseSeconds?: number;
  metrics?: Metrics;
  /** Per-message envelope senders, for domains whose return-path records are published. */
  returnPaths?: ReturnPaths;
}

/** Permits shared by every send slot of the process, so DELIVERY_IN_FLIGHT bounds them all together. */
class Permits {
  private queue: Array<() => void> = [];
  constructor(private free: number) {}

  async take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((resolve) => this.queue.push(resolve));
  }

  give(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.free++;
  }
}

/**
 * While requests hand mail to a drain, how long a claim that found the shared queue empty keeps the
 * drain from claiming again (each claim is a statement): the longest that mail queued unclaimed by
 * another process, or a retry coming due, waits behind handed-over mail.
 */
const SHARED_RECHECK_MS = 500;

/** Mail a request of this process queues for a running drain: claimed for it when inserted, handed over in memory. */
export interface DrainClaimant {
  /** The drain's owner, written as `claimed_by` with the rows. */
  owner: string;
  /** After the request's statement, exactly once: the rows it queued claimed for `owner`, or none. */
  handOver(emails: QueuedEmail[]): void;
}

/**
 * One drain's intake of handed-over mail. A drain must not end (return or throw) while a request it
 * gave a claim to is still writing: mail committed after the owner's next drain took its claims back
 * would otherwise wait for its claim to expire.
 */
class HandOver {
  readonly ready: QueuedEmail[] = [];
  private writing = 0;
  private open = true;
  private settled?: () => void;

  /** At most `max` rows wait or are being written (a claim batch's worth): past it, requests queue mail unclaimed. */
  constructor(
    readonly owner: string,
    private readonly max: number,
    private readonly wake: () => void,
  ) {}

  claimant(): DrainClaimant | undefined {
    if (!this.open || this.ready.length + this.writing >= this.max) return undefined;
    this.writing++;
    let done = false;
    return {
      owner: this.owner,
      handOver: (emails) => {
        if (done) return;
        done = true;
        this.ready.push(...emails);
        if (--this.writing === 0) this.settled?.();
        this.wake();
      },
    };
  }

  /** No more claimants; resolves once every request given one has handed over. */
  async close(): Promise<void> {
    this.open = false;
    while (this.writing > 0) await new Promise<void>((resolve) => (this.settled = resolve));
  }
}

/** One message's outcome on its way to the database, with the delivery it belongs to. */
interface Outcome {
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
class OutcomeRecorder {
  private waiting: Array<{ item: Outcome; resolve: () => void; reject: (err: unknown) => void }> = [];
  private running = false;

  constructor(private readonly write: (items: Outcome[]) => Promise<void>) {}

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
 * Delivers queued email. Each round claims a batch with FOR UPDATE SKIP LOCKED (so any number of
 * dispatchers share the queue), sends it over the pooled SMTP transport, and records each outcome:
 * accepted → SENT with `email.sent`; 4xx → queued again after a backoff; 5xx → FAILED with the reason.
 * If the server cannot be reached at all, the batch's claims are released and SmtpUnavailableError is
 * thrown, so the Temporal activity fails and is retried with backoff until the server is back.
 * A crash loses nothing: the owner's next drain takes its claims back (or they expire) and the mail is
 * sent (a message whose acceptance was not yet recorded may then be sent twice: at most one per permit,
 * DELIVERY_IN_FLIGHT per process). A campaign's batches are read, not claimed: its own workflow is their
 * only sender, and its retried activity reads them again.
 */
export class EmailDispatcher {
  /** Parsed DKIM keys by the SHA-256 of their PEM. */
  private readonly parsedKeys = new Map<string, crypto.KeyObject>();

  /** A permit is held from sending a message until its outcome is recorded: the process's crash exposure. */
  private readonly permits: Permits;

  /** The running drains' intakes of mail handed over by this process's requests. */
  private readonly handOvers = new Set<HandOver>();

  /** Every delivery's outcomes, recorded together. */
  private readonly outcomes: OutcomeRecorder;

  constructor(private readonly deps: DispatcherDeps) {
    this.permits = new Permits(deps.concurrency ?? 8);
    this.outcomes = new OutcomeRecorder((items) =>
      whileUnreachable(() => this.record(items), {
        forMs: RECORD_RETRY_MS,
        waiting: (err, attempt) => {
          if (attempt === 1) this.deps.log.warn({ err }, 'recording delivery outcomes failed; trying again until the database is back');
          for (const item of items) item.heartbeat();
        },
      }),
    );
  }

  /**
   * Delivers transactional mail until there has been none for `idleMs` (or `maxMs` passed). Then says
   * when the next queued message comes due (a retry after backoff, a claim left by a dead process),
   * so the dispatcher's execution can sleep on a timer until then or until it is signalled.
   */
  async drain(opts: {
    idleMs: number;
    maxMs: number;
    heartbeat: () => void;
    signal?: AbortSignal;
    /**
     * The claiming dispatcher (its workflow id). A dispatcher runs one drain at a time, so whatever it
     * still holds when a drain starts was left by an attempt that died (a crashed worker, a restarted
     * Temporal server re-offering the task): it is taken back at once, not when the claims expire.
     */
    owner: string;
  }): Promise<DrainReport & { idle: boolean; nextDueInSeconds: number | null }> {
    const report: DrainReport = { sent: 0, retried: 0, failed: 0 };
    await this.release(opts.owner);
    const batchSize = this.deps.batchSize ?? 100;
    // Rows handed over are this drain's alone: they wake it, not every drain of the process.
    const bell = new DrainBell();
    const handed = new HandOver(opts.owner, batchSize, () => bell.ring());
    this.handOvers.add(handed);
    let idle: boolean;
    let turn = 0;
    /** When a claim last found the shared queue empty. */
    let sharedEmptyAt = -Infinity;
    try {
      ({ idle } = await this.deps.queue.drain({ ...opts, bell }, async () => {
        // Mail handed over needs no claim and no reading back: it was claimed for this drain when inserted.
        // The shared queue (mail queued unclaimed past the hand-over's cap or by other processes, retries
        // coming due) gets every other round, so it is never starved by what is handed over; once a claim
        // found it empty, it is looked at again after SHARED_RECHECK_MS, not at every other round.
        const sharedTurn = turn++ % 2 === 1 && Date.now() - sharedEmptyAt >= SHARED_RECHECK_MS;
        let batch = handed.ready.length && !sharedTurn ? handed.ready.splice(0, batchSize) : await this.claim(opts.owner);
        if (!batch.length) sharedEmptyAt = Date.now();
        if (!batch.length && handed.ready.length) batch = handed.ready.splice(0, batchSize);
        if (batch.length) await this.deliver(batch, report, opts.heartbeat, opts.signal);
        return batch.length;
      }));
    } finally {
      this.handOvers.delete(handed);
      await handed.close();
    }
    // What was handed over while the drain ended goes out now. A drain cancelled (its worker stops) gives
    // back what it still holds, for the other workers' drains; one that died leaves its claims to expire.
    while (handed.ready.length && !opts.signal?.aborted) await this.deliver(handed.ready.splice(0, batchSize), report, opts.heartbeat, opts.signal);
    if (opts.signal?.aborted) await this.release(opts.owner);
    const [next] = await sql<{ due: number | null }>(
      this.deps.orm.em.fork(),
      `SELECT extract(epoch FROM min(greatest(next_attempt_at, coalesce(claimed_until, next_attempt_at))) - now())::float AS due
       FROM emails WHERE status = 'QUEUED' AND campaign_id IS NULL`,
    );
    return { ...report, idle, nextDueInSeconds: next.due === null ? null : Math.max(0, next.due) };
  }

  /** Gives back the unsent mail `owner` holds claimed: any drain may take it at once. */
  private async release(owner: string): Promise<void> {
    await sql(this.deps.orm.em.fork(), `UPDATE emails SET claimed_until = NULL, claimed_by = NULL WHERE claimed_by = ? AND status = 'QUEUED'`, [owner]);
  }

  /** For a request of this process about to queue mail: a running drain with room to take it in memory, if any. */
  claimant(): DrainClaimant | undefined {
    for (const handed of this.handOvers) {
      const claimant = handed.claimant();
      if (claimant) return claimant;
    }
    return undefined;
  }

  /** Claims due queued transactional mail for `owner`: every dispatcher shares this queue. */
  private async claim(owner: string): Promise<QueuedEmail[]> {
    return sql<QueuedEmail>(
      this.deps.orm.em.fork(),
      `WITH due AS (
         SELECT id FROM emails
         WHERE status = 'QUEUED' AND campaign_id IS NULL
           AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
         ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED
       )
       UPDATE emails e SET claimed_until = now() + make_interval(secs => ?), claimed_by = ?, attempts = e.attempts + 1
       FROM due WHERE e.id = due.id
       RETURNING ${QUEUED_COLUMNS}, e.attempts`,
      [this.deps.batchSize ?? 100, CLAIM_SECONDS, owner],
    );
  }

  /**
   * Splits what is due of a campaign into chunks of at most `size` recipients, by contact id (the
   * unique index the campaign's rows already have), after `after`: up to `count` of them. Each chunk is
   * delivered by one activity, so chunks on any worker never overlap and need no claims.
   */
  async campaignChunks(campaignId: string, after: string | null, size: number, count: number): Promise<CampaignChunk[]> {
    const ids = await sql<{ contact_id: string }>(
      this.deps.orm.em.fork(),
      `SELECT contact_id FROM emails WHERE campaign_id = ? AND status = 'QUEUED' AND next_attempt_at <= now()
         AND contact_id > coalesce(?::uuid, '00000000-0000-0000-0000-000000000000')
       ORDER BY contact_id LIMIT ?`,
      [campaignId, after, size * count],
    );
    const chunks: CampaignChunk[] = [];
    for (let i = 0; i < ids.length; i += size) {
      chunks.push({ after: i === 0 ? after : ids[i - 1].contact_id, upTo: ids[Math.min(i + size, ids.length) - 1].contact_id });
    }
    return chunks;
  }

  /** How much of a campaign is still queued, and when the first of it (a retry after a 4xx) comes due. */
  async campaignLeft(campaignId: string): Promise<{ remaining: number; nextDueInSeconds: number | null }> {
    const [left] = await sql<{ remaining: number; next_due: number | null }>(
      this.deps.orm.em.fork(),
      `SELECT count(*)::int AS remaining, extract(epoch FROM min(next_attempt_at) - now())::float AS next_due
       FROM emails WHERE campaign_id = ? AND status = 'QUEUED'`,
      [campaignId],
    );
    return { remaining: left.remaining, nextDueInSeconds: left.next_due === null ? null : Math.max(0, left.next_due) };
  }

  /**
   * One chunk of a campaign, for its `campaign-send` workflow: reads the chunk's due recipients
   * (unclaimed: only the activity the chunk was given to sends it, and its retry reads it again),
   * renders each with their own data, sends and records. `attempts` is the attempt about to be made;
   * recording its outcome writes it.
   */
  async deliverCampaignChunk(
    campaignId: string,
    chunk: CampaignChunk,
    opts: { heartbeat: () => void; signal?: AbortSignal },
  ): Promise<DrainReport & { claimed: number }> {
    const report: DrainReport = { sent: 0, retried: 0, failed: 0 };
    const batch = await sql<QueuedEmail>(
      this.deps.orm.em.fork(),
      `SELECT ${QUEUED_COLUMNS}, e.attempts + 1 AS attempts FROM emails e
       WHERE e.campaign_id = ? AND e.contact_id > coalesce(?::uuid, '00000000-0000-0000-0000-000000000000') AND e.contact_id <= ?::uuid
         AND e.status = 'QUEUED' AND e.next_attempt_at <= now()
       ORDER BY e.contact_id`,
      [campaignId, chunk.after, chunk.upTo],
    );
    if (batch.length) await this.deliver(batch, report, opts.heartbeat, opts.signal);
    return { ...report, claimed: batch.length };
  }

  private async deliver(all: QueuedEmail[], report: DrainReport, heartbeat: () => void = () => {}, signal?: AbortSignal): Promise<void> {
    const em = this.deps.orm.em.fork();
    const { draft, skipped } = await this.campaignDrafts(em, all);
    if (skipped.size) {
      await sql(em, `UPDATE emails SET status = 'CANCELLED', claimed_until = NULL, last_error = ?, updated_at = now() WHERE id = ANY(?::uuid[]) AND status = 'QUEUED'`, [
        'the contact unsubscribed before this was sent',
        [...skipped],
      ]);
    }
    const batch = all.filter((e) => !skipped.has(e.id));
    const attachments = await this.attachmentsOf(em, batch);
    const signing = await this.signingKeysOf(em, batch);
    /** Emails with an outcome from SMTP, recorded or being recorded. */
    const answered = new Set<string>();
    // The activity says it is alive at most once a second, not once a message.
    let lastBeat = 0;
    const beat = () => {
      if (Date.now() - lastBeat < 1000) return;
      lastBeat = Date.now();
      heartbeat();
    };
    let unreachable: string | undefined;
    let failure: unknown;
    let next = 0;
    // A slot holds one of the process's permits from sending a message until its outcome is recorded,
    // so a crash can send again only what SMTP accepted and was not yet recorded: at most one message
    // per permit (DELIVERY_IN_FLIGHT per process), whatever number of dispatchers and campaigns share it.
    const slot = async () => {
      while (next < batch.length && !unreachable && failure === undefined && !signal?.aborted) {
        await this.permits.take();
        try {
          if (next >= batch.length || unreachable || failure !== undefined || signal?.aborted) break;
          const email = batch[next++];
          const compose = draft(email);
          const { outcome, subject } = await this.deps.sender.send(
            this.message(email, attachments.get(email.id) ?? [], compose, signing.returnPaths),
            signing.keys.get(senderOf(email)),
          );
          if (outcome.kind === 'unreachable') {
            unreachable = outcome.error;
            continue;
          }
          answered.add(email.id);
          await this.outcomes.record({ email, outcome, subject: compose ? subject : undefined, report, heartbeat });
          beat();
        } finally {
          this.permits.give();
        }
      }
    };
    const slots = await Promise.allSettled(Array.from({ length: Math.min(this.deps.concurrency ?? 8, batch.length) }, () =>
      slot().catch((err) => {
        // The first failure (the database went away) stops every slot; the rest finish what they hold.
        failure ??= err;
        throw err;
      }),
    ));
    if (slots.some((r) => r.status === 'rejected')) throw failure;
    if (unreachable) {
      const waiting = batch.filter((e) => !answered.has(e.id)).map((e) => e.id);
      await sql(em, `UPDATE emails SET claimed_until = NULL, last_error = ? WHERE id = ANY(?::uuid[]) AND status = 'QUEUED'`, [
        unreachable,
        waiting,
      ]);
      throw new SmtpUnavailableError(`SMTP server unavailable: ${unreachable}`);
    }
  }

  /**
   * Campaign mail is stored unrendered: each recipient's message is rendered as it is sent, with their
   * data as it is when the batch is claimed, where it is encoded (on a delivery thread, so the rendering
   * and its garbage stay off this one). A MARKETING recipient who unsubscribed since the audience was
   * fixed is skipped.
   */
  private async campaignDrafts(em: EntityManager, batch: QueuedEmail[]): Promise<{ draft: (e: QueuedEmail) => Draft | undefined; skipped: Set<string> }> {
    const skipped = new Set<string>();
    const unrendered = (e: QueuedEmail) => e.html === null && !!e.campaign_id;
    const todo = batch.filter(unrendered);
    if (todo.length === 0) return { draft: () => undefined, skipped };
    const campaigns = new Map(
      (
        await sql<{ id: string; subject: string; body: string; type: EmailType; tracking: TrackingOverride | null }>(em, `SELECT id, subject, body, type, tracking FROM campaigns WHERE id = ANY(?::uuid[])`, [
          [...new Set(todo.map((e) => e.campaign_id!))],
        ])
      ).map((c) => [c.id, c]),
    );
    const contacts = new Map(
      (
        await sql<{ id: string; email: string; subscribed: boolean; data: Record<string, unknown> }>(em, `SELECT id, email, subscribed, data FROM contacts WHERE id = ANY(?::uuid[])`, [
          todo.map((e) => e.contact_id),
        ])
      ).map((c) => [c.id, c]),
    );
    const settings = new Map<string, ProjectSettings>();
    for (const projectId of new Set(todo.map((e) => e.project_id))) settings.set(projectId, await projectSettings(em, projectId));
    for (const e of todo) {
      if (campaigns.get(e.campaign_id!)?.type === 'MARKETING' && contacts.get(e.contact_id)?.subscribed === false) skipped.add(e.id);
    }
    const draft = (e: QueuedEmail): Draft | undefined => {
      const campaign = unrendered(e) ? campaigns.get(e.campaign_id!) : undefined;
      const contact = contacts.get(e.contact_id);
      if (!campaign || !contact) return undefined;
      return {
        emailId: e.id,
        type: campaign.type,
        subject: campaign.subject,
        body: campaign.body,
        contact: { id: contact.id, email: contact.email, data: contact.data },
        headers: {},
        settings: settings.get(e.project_id)!,
        tracking: [campaign.tracking],
      };
    };
    return { draft, skipped };
  }

  private async attachmentsOf(em: EntityManager, batch: QueuedEmail[]): Promise<Map<string, Attachment[]>> {
    const rows = await sql<Attachment>(
      em,
      `SELECT email_id, filename, content_type, content_id, disposition, content FROM email_attachments
       WHERE email_id = ANY(?::uuid[]) ORDER BY email_id, position`,
      [batch.map((e) => e.id)],
    );
    return Map.groupBy(rows, (r) => r.email_id);
  }

  /**
   * The DKIM key of each sender domain in the batch, and which have their return path published, read with the batch (one query) so a domain
   * deleted and added again signs with its new key at once. Parsing a PEM costs more than signing, so
   * parsed keys are kept, by the PEM's own hash: a new key is a new entry, never a stale hit.
   */
  private async signingKeysOf(em: EntityManager, batch: QueuedEmail[]): Promise<{ keys: Map<string, DkimKey>; returnPaths: Set<string> }> {
    const senders = [...new Set(batch.map(senderOf))];
    const rows = await sql<{ project_id: string; domain: string; dkim_selector: string; dkim_private_key: string; record_status: DomainRow['record_status'] }>(
      em,
      `SELECT d.project_id, d.domain, d.dkim_selector, d.dkim_private_key, d.record_status
       FROM domains d JOIN unnest(?::uuid[], ?::text[]) AS s(project_id, domain) ON d.project_id = s.project_id AND d.domain = s.domain`,
      [senders.map((s) => s.split(':')[0]), senders.map((s) => s.slice(s.indexOf(':') + 1))],
    );
    const found = new Map<string, DkimKey>();
    const returnPaths = new Set<string>();
    for (const row of rows) {
      if (returnPathVerified(row.record_status)) returnPaths.add(`${row.project_id}:${row.domain}`);
      const fingerprint = crypto.createHash('sha256').update(row.dkim_private_key).digest('base64');
      let privateKey = this.parsedKeys.get(fingerprint);
      if (!privateKey) {
        privateKey = crypto.createPrivateKey(row.dkim_private_key);
        this.parsedKeys.set(fingerprint, privateKey);
      }
      found.set(`${row.project_id}:${row.domain}`, { domainName: row.domain, keySelector: row.dkim_selector, privateKey });
    }
    return { keys: found, returnPaths };
  }

  private message(e: QueuedEmail, attachments: Attachment[], compose: Draft | undefined, returnPaths: Set<string>): OutgoingMessage | DraftMessage {
    // A domain whose return-path records are not found keeps the From address as envelope sender: an
    // envelope sender on a host with no MX gets mail refused by many receivers.
    const domain = e.from_email.slice(e.from_email.lastIndexOf('@') + 1);
    const returnPath = this.deps.returnPaths && returnPaths.has(senderOf(e)) ? this.deps.returnPaths.address(e.id, domain) : undefined;
    const common = {
      returnPath,
      messageId: e.message_id,
      from: { name: e.from_name, address: e.from_email },
      to: { name: e.to_name, address: e.to_email },
      replyTo: e.reply_to ?? e.from_email,
      attachments: attachments.map((a) => ({
        filename: a.filename,
        contentType: a.content_type,
        content: a.content,
        disposition: a.disposition,
        contentId: a.content_id,
      })),
    };
    if (compose) return { ...common, compose };
    // html is null for a text-only submitted message.
    return { ...common, subject: e.subject, text: e.text || null, html: e.html, headers: e.headers };
  }

  /**
   * One transaction for the whole batch, one statement per outcome kind, each writing the attempt it
   * records (a campaign's mail is not claimed, so this is where its count moves). Only rows still QUEUED change,
   * and `email.sent` is written only for those, so a batch recorded twice records nothing twice.
   */
  private async record(items: Outcome[]): Promise<void> {
    if (items.length === 0) return;
    const of = <K extends Outcome['outcome']['kind']>(kind: K) =>
      items.flatMap((i) => (i.outcome.kind === kind ? [{ ...i, outcome: i.outcome as Extract<DeliveryOutcome, { kind: K }> }] : []));
    const sent = of('sent');
    const projectOf = new Map(items.map((i) => [i.email.contact_id, i.email.project_id]));
    const retry = of('retry');
    // A 5xx that says the address does not exist (or no longer takes mail) is a hard bounce, as a DSN saying so would be.
    const rejections = of('failed').map((f) => ({ ...f, verdict: verdictOf(f.outcome.error) }));
    const bounced = rejections.filter((f) => f.verdict.bounceType === 'Permanent');
    const failed = rejections.filter((f) => f.verdict.bounceType !== 'Permanent');
    const write = async (tx: EntityManager): Promise<EventRecord[]> => {
      const recorded = sent.length ? await this.recordSent(tx, sent) : [];
      if (bounced.length) recorded.push(...(await this.recordRejectedForGood(tx, bounced)));
      if (retry.length) {
        await sql(
          tx,
          `UPDATE emails e SET next_attempt_at = now() + make_interval(secs => v.delay), claimed_until = NULL,
                               attempts = v.attempts, last_error = v.error, updated_at = now()
           FROM unnest(?::uuid[], ?::int[], ?::int[], ?::text[]) AS v(id, attempts, delay, error) WHERE e.id = v.id AND e.status = 'QUEUED'`,
          [
            retry.map((r) => r.email.id),
            retry.map((r) => r.email.attempts),
            retry.map((r) => retryDelaySeconds(r.email.attempts, this.deps.retryBaseSeconds ?? 30)),
            retry.map((r) => r.outcome.error),
          ],
        );
      }
      if (failed.length) {
        const failedRows = await sql<{ id: string; campaign_id: string | null }>(
          tx,
          `UPDATE emails e SET status = 'FAILED', failed_at = now(), claimed_until = NULL, attempts = v.attempts, last_error = v.error, updated_at = now()
           FROM unnest(?::uuid[], ?::int[], ?::text[]) AS v(id, attempts, error) WHERE e.id = v.id AND e.status = 'QUEUED' RETURNING e.id, e.campaign_id`,
          [failed.map((f) => f.email.id), failed.map((f) => f.email.attempts), failed.map((f) => f.outcome.error)],
        );
        await countForCampaigns(tx, failedRows, 'failed_count');
      }
      return recorded;
    };
    // Accepted mail alone (nearly always) is one statement, atomic by itself: no transaction's extra round trips.
    const em = this.deps.orm.em.fork();
    const recorded = retry.length || rejections.length ? await em.transactional(write) : await write(em);
    for (const i of sent) i.report.sent++;
    for (const i of retry) i.report.retried++;
    for (const i of rejections) i.report.failed++;
    this.deps.metrics?.emailDeliveries.inc({ outcome: 'sent' }, sent.length);
    this.deps.metrics?.emailDeliveries.inc({ outcome: 'retry' }, retry.length);
    this.deps.metrics?.emailDeliveries.inc({ outcome: 'failed' }, rejections.length);
    for (const [projectId, events] of Map.groupBy(recorded, (e) => projectOf.get(e.contactId)!)) {
      this.deps.hub?.publish({ projectId, contactIds: [], events });
    }
  }

  /**
   * Mail the relay (or the receiving MX through it) refused for good during the SMTP session: recorded as
   * a Permanent bounce through the path every provider's report takes, so the email is BOUNCED, its
   * campaign counts it and the contact is unsubscribed, instead of a plain FAILED.
   */
  private async recordRejectedForGood(tx: EntityManager, bounced: Array<{ email: QueuedEmail; outcome: { error: string }; verdict: SmtpVerdict }>): Promise<EventRecord[]> {
    const events: EventRecord[] = [];
    const still = await sql<{ id: string }>(
      tx,
      `UPDATE emails e SET claimed_until = NULL, attempts = v.attempts, last_error = v.error, updated_at = now()
       FROM unnest(?::uuid[], ?::int[], ?::text[]) AS v(id, attempts, error) WHERE e.id = v.id AND e.status = 'QUEUED' RETURNING e.id`,
      [bounced.map((b) => b.email.id), bounced.map((b) => b.email.attempts), bounced.map((b) => b.outcome.error)],
    );
    const queued = new Set(still.map((r) => r.id));
    for (const b of bounced.filter((x) => queued.has(x.email.id))) {
      const details = { bounceSubType: b.verdict.subType, reason: b.verdict.reason, status: b.verdict.status, diagnosticCode: b.outcome.error.slice(0, 1000), source: 'smtp' };
      const recorded = await recordEmailActivity(tx, b.email.id, { kind: 'bounce', bounceType: 'Permanent', details: Object.fromEntries(Object.entries(details).filter(([, v]) => v !== null)) });
      events.push(...(recorded?.events ?? []));
    }
    return events;
  }

  /**
   * Accepted mail in one statement: each email still unsent becomes SENT, its campaign counts it, and its
   * `email.sent` event is written, only for the rows that really changed (so recording twice records once).
   */
  private async recordSent(em: EntityManager, sent: Array<Outcome & { outcome: Extract<DeliveryOutcome, { kind: 'sent' }> }>): Promise<EventRecord[]> {
    const rows = await sql<EventRow>(
      em,
      // An open or click can be recorded before this (the recipient was quick): keep the higher status.
      // A campaign cancelled while this was in flight still sent it: what left is recorded as sent.
      `WITH v AS (
         SELECT * FROM unnest(?::uuid[], ?::int[], ?::text[], ?::text[], ?::uuid[], ?::jsonb[]) AS v(id, attempts, pid, subject, event_id, data)
       ), updated AS (
         UPDATE emails e SET status = CASE WHEN e.status IN ('QUEUED', 'CANCELLED') THEN 'SENT' ELSE e.status END, sent_at = now(),
                             provider_message_id = v.pid, subject = coalesce(v.subject, e.subject), claimed_until = NULL,
                             attempts = v.attempts, last_error = NULL, updated_at = now()
         FROM v WHERE e.id = v.id AND e.sent_at IS NULL AND e.status <> 'FAILED'
         RETURNING e.id, e.project_id, e.contact_id, e.campaign_id
       ), counted AS (
         UPDATE campaigns c SET sent_count = c.sent_count + u.n, updated_at = now()
         FROM (SELECT campaign_id, count(*)::int AS n FROM updated WHERE campaign_id IS NOT NULL GROUP BY campaign_id) u
         WHERE c.id = u.campaign_id
       )
       INSERT INTO events (id, project_id, contact_id, name, data, created_at)
       SELECT v.event_id, u.project_id, u.contact_id, 'email.sent', v.data, now() FROM updated u JOIN v ON v.id = u.id
       RETURNING id, name, contact_id, data, created_at`,
      [
        sent.map((s) => s.email.id),
        sent.map((s) => s.email.attempts),
        sent.map((s) => s.outcome.providerMessageId),
        sent.map((s) => s.subject ?? null),
        sent.map(() => newId()),
        sent.map(({ email: e }) => JSON.stringify({ emailId: e.id, messageId: e.message_id, templateId: e.template_id, campaignId: e.campaign_id })),
      ],
    );
    return rows.map(toEventRecord);
  }
}
