import crypto from 'node:crypto';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from 'pino';
import type { SendMailOptions } from 'nodemailer/lib/mailer';
import { sql } from '../../db/orm';
import type { DeliveryOutcome, Mailer } from '../../mail/transport';
import type { ActivityHub } from '../events/contact-activity';
import { insertEvents, type NewEvent } from '../events/events.store';
import { EMAIL_QUEUED_CHANNEL } from './emails.service';

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

interface SigningKey {
  domainName: string;
  keySelector: string;
  privateKey: crypto.KeyObject;
}

export interface DrainReport {
  sent: number;
  retried: number;
  failed: number;
}

/** Thrown when the SMTP server cannot be reached: the drain activity fails and Temporal retries it with backoff. */
export class SmtpUnavailableError extends Error {}

const CLAIM_SECONDS = 120;

function groupBy<T, K>(items: T[], key: (t: T) => K): Map<K, T[]> {
  const out = new Map<K, T[]>();
  for (const item of items) out.set(key(item), [...(out.get(key(item)) ?? []), item]);
  return out;
}

/** Backoff for a message the server refused with 4xx: base, 2 × base, 4 × base … capped at 1 h. */
export const retryDelaySeconds = (attempts: number, baseSeconds: number) => Math.min(3600, baseSeconds * 2 ** Math.max(0, attempts - 1));

/**
 * Wakes idle dispatchers of this process when mail is queued (PostgreSQL LISTEN on the channel the
 * send transaction NOTIFYs at commit). Without the listener they still poll, only more slowly.
 */
export class QueueSignal {
  private client?: pg.Client;
  private waiters = new Set<() => void>();

  constructor(private readonly databaseUrl: string) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('notification', () => this.wakeAll());
    client.on('error', () => {
      this.client = undefined;
    });
    await client.connect();
    await client.query(`LISTEN ${EMAIL_QUEUED_CHANNEL}`);
    this.client = client;
  }

  wakeAll(): void {
    for (const wake of this.waiters) wake();
    this.waiters.clear();
  }

  /** Resolves on the next notification, after `ms`, or when `signal` aborts. */
  wait(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, this.client ? ms : Math.min(ms, 500));
      signal?.addEventListener('abort', done);
      this.waiters.add(done);
    });
  }

  async stop(): Promise<void> {
    this.wakeAll();
    await this.client?.end().catch(() => {});
    this.client = undefined;
  }
}

export interface DispatcherDeps {
  orm: MikroORM;
  mailer: Mailer;
  queue: QueueSignal;
  log: Logger;
  /** Told about every committed event (segments, automations react to them). */
  hub?: ActivityHub;
  batchSize?: number;
  concurrency?: number;
  /** First delay after a 4xx reply (EMAIL_RETRY_BASE_SECONDS). */
  retryBaseSeconds?: number;
}

/**
 * Delivers queued email. Each round claims a batch with FOR UPDATE SKIP LOCKED (so any number of
 * dispatchers share the queue), sends it over the pooled SMTP transport, and records each outcome:
 * accepted → SENT with `email.sent`; 4xx → queued again after a backoff; 5xx → FAILED with the reason.
 * If the server cannot be reached at all, the batch's claims are released and SmtpUnavailableError is
 * thrown, so the Temporal activity fails and is retried with backoff until the server is back.
 * A crash loses nothing: claims expire and another dispatcher sends the mail (a message whose
 * acceptance was not yet recorded may then be sent twice; at most one batch).
 */
export class EmailDispatcher {
  private readonly keys = new Map<string, SigningKey | null>();

  constructor(private readonly deps: DispatcherDeps) {}

  async drain(opts: { until: number; heartbeat: () => void; signal?: AbortSignal }): Promise<DrainReport> {
    const report: DrainReport = { sent: 0, retried: 0, failed: 0 };
    while (Date.now() < opts.until && !opts.signal?.aborted) {
      opts.heartbeat();
      const batch = await this.claim();
      if (batch.length === 0) {
        await this.deps.queue.wait(Math.min(1000, Math.max(0, opts.until - Date.now())), opts.signal);
        continue;
      }
      await this.deliver(batch, report);
    }
    return report;
  }

  private async claim(): Promise<QueuedEmail[]> {
    return sql<QueuedEmail>(
      this.deps.orm.em.fork(),
      `WITH due AS (
         SELECT id FROM emails
         WHERE status = 'QUEUED' AND campaign_id IS NULL AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
         ORDER BY next_attempt_at LIMIT ? FOR UPDATE SKIP LOCKED
       )
       UPDATE emails e SET claimed_until = now() + make_interval(secs => ?), attempts = e.attempts + 1
       FROM due WHERE e.id = due.id
       RETURNING e.id, e.project_id, e.contact_id, e.template_id, e.campaign_id, e.from_email, e.from_name, e.reply_to,
                 e.to_email, e.to_name, e.subject, e.html, e.text, e.headers, e.message_id, e.attempts`,
      [this.deps.batchSize ?? 100, CLAIM_SECONDS],
    );
  }

  private async deliver(batch: QueuedEmail[], report: DrainReport): Promise<void> {
    const em = this.deps.orm.em.fork();
    const attachments = await this.attachmentsOf(em, batch);
    const outcomes = new Map<string, DeliveryOutcome>();
    let unreachable: string | undefined;
    let next = 0;
    const worker = async () => {
      while (next < batch.length && !unreachable) {
        const email = batch[next++];
        const message = await this.message(em, email, attachments.get(email.id) ?? []);
        const outcome = await this.deps.mailer.send(message);
        if (outcome.kind === 'unreachable') unreachable = outcome.error;
        else outcomes.set(email.id, outcome);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.deps.concurrency ?? 16, batch.length) }, worker));
    await this.record(batch, outcomes, report);
    if (unreachable) {
      const waiting = batch.filter((e) => !outcomes.has(e.id)).map((e) => e.id);
      await sql(em, `UPDATE emails SET claimed_until = NULL, last_error = ? WHERE id = ANY(?::uuid[]) AND status = 'QUEUED'`, [
        unreachable,
        waiting,
      ]);
      throw new SmtpUnavailableError(`SMTP server unavailable: ${unreachable}`);
    }
  }

  private async attachmentsOf(em: EntityManager, batch: QueuedEmail[]): Promise<Map<string, Attachment[]>> {
    const rows = await sql<Attachment>(
      em,
      `SELECT email_id, filename, content_type, content_id, disposition, content FROM email_attachments
       WHERE email_id = ANY(?::uuid[]) ORDER BY email_id, position`,
      [batch.map((e) => e.id)],
    );
    const byEmail = new Map<string, Attachment[]>();
    for (const r of rows) byEmail.set(r.email_id, [...(byEmail.get(r.email_id) ?? []), r]);
    return byEmail;
  }

  /** The sender domain's DKIM key, parsed once per process. */
  private async signingKey(em: EntityManager, projectId: string, fromEmail: string): Promise<SigningKey | null> {
    const domain = fromEmail.slice(fromEmail.lastIndexOf('@') + 1);
    const cacheKey = `${projectId}:${domain}`;
    if (!this.keys.has(cacheKey)) {
      const [row] = await sql<{ dkim_selector: string; dkim_private_key: string }>(
        em,
        `SELECT dkim_selector, dkim_private_key FROM domains WHERE project_id = ? AND domain = ?`,
        [projectId, domain],
      );
      this.keys.set(
        cacheKey,
        row ? { domainName: domain, keySelector: row.dkim_selector, privateKey: crypto.createPrivateKey(row.dkim_private_key) } : null,
      );
    }
    return this.keys.get(cacheKey)!;
  }

  private async message(em: EntityManager, e: QueuedEmail, attachments: Attachment[]): Promise<SendMailOptions> {
    const dkim = await this.signingKey(em, e.project_id, e.from_email);
    return {
      messageId: e.message_id,
      from: { name: e.from_name ?? '', address: e.from_email },
      to: { name: e.to_name ?? '', address: e.to_email },
      replyTo: e.reply_to ?? e.from_email,
      subject: e.subject,
      ...(e.text ? { text: e.text } : {}),
      html: e.html ?? '',
      headers: e.headers,
      attachments: attachments.map((a) => ({
        filename: a.filename,
        content: a.content,
        contentType: a.content_type,
        contentDisposition: a.disposition,
        ...(a.content_id ? { cid: a.content_id } : {}),
      })),
      ...(dkim ? { dkim: dkim as never } : {}),
    };
  }

  /**
   * One transaction for the whole batch, one statement per outcome kind. Only rows still QUEUED change,
   * and `email.sent` is written only for those, so a batch recorded twice records nothing twice.
   */
  private async record(batch: QueuedEmail[], outcomes: Map<string, DeliveryOutcome>, report: DrainReport): Promise<void> {
    if (outcomes.size === 0) return;
    const of = <K extends DeliveryOutcome['kind']>(kind: K) =>
      batch.flatMap((e) => {
        const o = outcomes.get(e.id);
        return o?.kind === kind ? [{ email: e, outcome: o as Extract<DeliveryOutcome, { kind: K }> }] : [];
      });
    const sent = of('sent');
    const projectOf = new Map(batch.map((e) => [e.contact_id, e.project_id]));
    const retry = of('retry');
    const failed = of('failed');
    const recorded = await this.deps.orm.em.fork().transactional(async (tx) => {
      const updated = sent.length
        ? await sql<{ id: string }>(
            tx,
            // An open or click can be recorded before this (the recipient was quick): keep the higher status.
            `UPDATE emails e SET status = CASE WHEN e.status = 'QUEUED' THEN 'SENT' ELSE e.status END, sent_at = now(),
                                 provider_message_id = v.pid, claimed_until = NULL, last_error = NULL, updated_at = now()
             FROM unnest(?::uuid[], ?::text[]) AS v(id, pid)
             WHERE e.id = v.id AND e.sent_at IS NULL AND e.status <> 'FAILED' RETURNING e.id`,
            [sent.map((s) => s.email.id), sent.map((s) => s.outcome.providerMessageId)],
          )
        : [];
      if (retry.length) {
        await sql(
          tx,
          `UPDATE emails e SET next_attempt_at = now() + make_interval(secs => v.delay), claimed_until = NULL,
                               last_error = v.error, updated_at = now()
           FROM unnest(?::uuid[], ?::int[], ?::text[]) AS v(id, delay, error) WHERE e.id = v.id AND e.status = 'QUEUED'`,
          [retry.map((r) => r.email.id), retry.map((r) => retryDelaySeconds(r.email.attempts, this.deps.retryBaseSeconds ?? 30)), retry.map((r) => r.outcome.error)],
        );
      }
      if (failed.length) {
        await sql(
          tx,
          `UPDATE emails e SET status = 'FAILED', failed_at = now(), claimed_until = NULL, last_error = v.error, updated_at = now()
           FROM unnest(?::uuid[], ?::text[]) AS v(id, error) WHERE e.id = v.id AND e.status = 'QUEUED'`,
          [failed.map((f) => f.email.id), failed.map((f) => f.outcome.error)],
        );
      }
      const updatedIds = new Set(updated.map((u) => u.id));
      const events: NewEvent[] = sent
        .filter((s) => updatedIds.has(s.email.id))
        .map(({ email: e }) => ({
          projectId: e.project_id,
          contactId: e.contact_id,
          name: 'email.sent',
          data: { emailId: e.id, messageId: e.message_id, templateId: e.template_id, campaignId: e.campaign_id },
        }));
      return insertEvents(tx, events);
    });
    report.sent += sent.length;
    report.retried += retry.length;
    report.failed += failed.length;
    for (const [projectId, events] of groupBy(recorded, (e) => projectOf.get(e.contactId)!)) {
      this.deps.hub?.publish({ projectId, contactIds: [], events });
    }
  }
}
