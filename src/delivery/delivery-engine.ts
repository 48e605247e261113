import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { DrainBell, type QueueSignal } from '../db/work-queue';
import type { ReturnPaths } from '../mail/return-path';
import type { DraftMessage } from '../mail/compose';
import type { OutgoingMessage } from '../mail/mime';
import type { ActivityHub } from '../bus/contact-activity';
import type { Metrics } from '../metrics';
import { campaignDrafts } from './campaign-drafts';
import type { MessageSender } from './delivery-threads';
import { type DrainClaimant, HandOver, SHARED_RECHECK_MS } from './hand-over';
import { OutcomeRecorder } from './outcome-recorder';
import { Permits } from './permits';
import { type Attachment, type CampaignChunk, type Draft, type DrainReport, type QueuedEmail, senderOf, SmtpUnavailableError } from './queued-email';
import {
  attachmentsOf,
  campaignChunkEmails,
  campaignChunks,
  campaignLeft,
  cancelQueued,
  claimDue,
  markSuppressed,
  nextDueInSeconds,
  type PortSql,
  portSql,
  releaseClaims,
  releaseWithError,
} from './delivery.queries';
import type { DeliveryPorts } from './delivery-ports';
import { SigningKeys } from './signing-keys';

export interface DeliveryEngineDeps {
  orm: MikroORM;
  /** What delivery needs of the modules (./delivery-ports.ts), wired by main.ts. */
  ports: DeliveryPorts;
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
  /** SOFT_BOUNCE_LIMIT, for soft 5xx refusals about the recipient's mailbox. */
  softBounceLimit?: number;
  metrics?: Metrics;
  /** Per-message envelope senders, for domains whose return-path records are published. */
  returnPaths?: ReturnPaths;
}

/**
 * Delivers queued email. Each round claims a batch with FOR UPDATE SKIP LOCKED (so any number of
 * dispatchers share the queue), sends it over the pooled SMTP transport, and records each outcome:
 * accepted → SENT with `email.sent`; 4xx → queued again after a backoff; 5xx → FAILED with the reason
 * (or a bounce, when the reply speaks of the recipient).
 * If the server cannot be reached at all, the batch's claims are released and SmtpUnavailableError is
 * thrown, so the Temporal activity fails and is retried with backoff until the server is back.
 * A crash loses nothing: the owner's next drain takes its claims back (or they expire) and the mail is
 * sent (a message whose acceptance was not yet recorded may then be sent twice: at most one per permit,
 * DELIVERY_IN_FLIGHT per process). A campaign's batches are read, not claimed: its own workflow is their
 * only sender, and its retried activity reads them again.
 */
export class DeliveryEngine {
  /** Each sender domain's DKIM key, parsed once. */
  private readonly signingKeys: SigningKeys;

  /** The ports' SQL fragments, taken once. */
  private readonly sql: PortSql;

  /** A permit is held from sending a message until its outcome is recorded: the process's crash exposure. */
  private readonly permits: Permits;

  /** The running drains' intakes of mail handed over by this process's requests. */
  private readonly handOvers = new Set<HandOver>();

  /** Every delivery's outcomes, recorded together. */
  private readonly outcomes: OutcomeRecorder;

  constructor(private readonly deps: DeliveryEngineDeps) {
    this.sql = portSql(deps.ports);
    this.signingKeys = new SigningKeys(deps.ports.returnPathVerified);
    this.permits = new Permits(deps.concurrency ?? 8);
    this.outcomes = new OutcomeRecorder({ ...deps, sql: this.sql });
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
    await releaseClaims(this.deps.orm.em.fork(), opts.owner);
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
        let batch =
          handed.ready.length && !sharedTurn ? handed.ready.splice(0, batchSize) : await claimDue(this.deps.orm.em.fork(), this.sql, opts.owner, batchSize);
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
    if (opts.signal?.aborted) await releaseClaims(this.deps.orm.em.fork(), opts.owner);
    return { ...report, idle, nextDueInSeconds: await nextDueInSeconds(this.deps.orm.em.fork()) };
  }

  /** Splits what is due of a campaign into chunks of at most `size` recipients (`campaignChunks`). */
  campaignChunks(campaignId: string, after: string | null, size: number, count: number): Promise<CampaignChunk[]> {
    return campaignChunks(this.deps.orm.em.fork(), campaignId, after, size, count);
  }

  /** How much of a campaign is still queued, and when the first of it comes due. */
  campaignLeft(campaignId: string): Promise<{ remaining: number; nextDueInSeconds: number | null }> {
    return campaignLeft(this.deps.orm.em.fork(), campaignId);
  }

  /** Whether a drain of this process runs now (then requests tell it of their mail directly). */
  get draining(): boolean {
    return this.deps.queue.draining;
  }

  /** Mail queued by this process: its waiting drains look at once. */
  queuedHere(): void {
    this.deps.queue.queuedHere();
  }

  /** For a request of this process about to queue mail: a running drain with room to take it in memory, if any. */
  claimant(): DrainClaimant | undefined {
    for (const handed of this.handOvers) {
      const claimant = handed.claimant();
      if (claimant) return claimant;
    }
    return undefined;
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
    const batch = await campaignChunkEmails(this.deps.orm.em.fork(), this.sql, campaignId, chunk);
    if (batch.length) await this.deliver(batch, report, opts.heartbeat, opts.signal);
    return { ...report, claimed: batch.length };
  }

  private async deliver(claimed: QueuedEmail[], report: DrainReport, heartbeat: () => void = () => {}, signal?: AbortSignal): Promise<void> {
    const em = this.deps.orm.em.fork();
    // An address suppressed since its mail was queued (or its campaign's audience fixed) gets nothing.
    const suppressed = claimed.filter((e) => e.suppression);
    if (suppressed.length) await this.recordSuppressed(em, suppressed);
    const all = suppressed.length ? claimed.filter((e) => !e.suppression) : claimed;
    const { draft, skipped } = await campaignDrafts(em, this.deps.ports.projectSettings, all);
    if (skipped.size) {
      await cancelQueued(em, [...skipped], 'the contact unsubscribed before this was sent');
    }
    const batch = all.filter((e) => !skipped.has(e.id));
    const attachments = await this.attachmentsByEmail(em, batch);
    const signing = await this.signingKeys.of(em, batch);
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
    const slots = await Promise.allSettled(
      Array.from({ length: Math.min(this.deps.concurrency ?? 8, batch.length) }, () =>
        slot().catch((err) => {
          // The first failure (the database went away) stops every slot; the rest finish what they hold.
          failure ??= err;
          throw err;
        }),
      ),
    );
    if (slots.some((r) => r.status === 'rejected')) throw failure;
    if (unreachable) {
      const waiting = batch.filter((e) => !answered.has(e.id)).map((e) => e.id);
      await releaseWithError(em, waiting, unreachable);
      throw new SmtpUnavailableError(`SMTP server unavailable: ${unreachable}`);
    }
  }

  private async recordSuppressed(em: EntityManager, emails: QueuedEmail[]): Promise<void> {
    const projectOf = new Map(emails.map((e) => [e.contact_id, e.project_id]));
    const events = (await markSuppressed(em, this.sql, emails)).map((row) => this.deps.ports.toEventRecord(row));
    for (const [projectId, ofProject] of Map.groupBy(events, (e) => projectOf.get(e.contactId)!)) {
      this.deps.hub?.publish({ projectId, contactIds: [], events: ofProject });
    }
  }

  private async attachmentsByEmail(em: EntityManager, batch: QueuedEmail[]): Promise<Map<string, Attachment[]>> {
    return Map.groupBy(
      await attachmentsOf(
        em,
        batch.map((e) => e.id),
      ),
      (r) => r.email_id,
    );
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
}
