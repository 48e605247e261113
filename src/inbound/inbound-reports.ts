import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { newId } from '../db/ids';
import { type Orm, transaction } from '../db/orm';
import { StatementBatcher } from '../db/statement-batcher';
import type { ActivityHub } from '../bus/contact-activity';
import type { InboundReport, RecipientOutcome } from './bounce-report';
import type { MxEnvelope, MxHandler } from './mx-listener';
import type { InboundPorts, RecordedActivity, ReportActivity } from './inbound-ports';
import type { ComplaintAuthentication, ReportAuthenticity } from './report-authenticity';
import type { ReportReader } from './report-threads';
import type { ReturnPaths } from '../mail/return-path';
import { InboundReportSchema } from './inbound-reports.entity';
import { emailByMessageId, type EmailRef, emailRecipient, isVerifiedDomain, type LoggedReport, rememberReport, rememberReportFor } from './inbound.queries';

export interface InboundDeps {
  orm: Orm;
  returnPaths: ReturnPaths;
  hub: ActivityHub;
  /** The modules' side: recording what a report says, judging a project's rates (./inbound-ports.ts). */
  ports: Pick<InboundPorts, 'recordEmailActivity' | 'insertEvents' | 'insertEventsTogether' | 'judge'>;
  rules: { softBounceLimit: number };
  /** Reads the message off the main thread (report-threads.ts). */
  reader: ReportReader;
  /** Decides which complaints count toward a suspension. */
  authenticity: ReportAuthenticity;
  log: Logger;
}

/** Finished rows stay this long (the maintenance schedule's purge). */
const REPORT_LOG_DAYS = 30;

/** The report's own Message-ID (an MTA sending it again sends the same one), else a digest of its bytes. */
function reportKey(raw: Buffer): string {
  const head = raw.subarray(0, 64 * 1024).toString('latin1');
  const end = head.search(/\r?\n\r?\n/);
  // Only printable characters: a NUL (which PostgreSQL refuses) or a control makes the digest the key.
  const id = /^message-id:[ \t]*(<[!-=?-~]{1,900}>)[ \t]*$/im.exec(end >= 0 ? head.slice(0, end) : head)?.[1];
  return id ?? `sha256:${crypto.createHash('sha256').update(raw).digest('hex')}`;
}

/** The outcome a bounce or delay report gives for this email's recipient (or its only one). */
function outcomeFor(recipients: RecipientOutcome[], email: EmailRef): RecipientOutcome | undefined {
  return recipients.find((r) => r.recipient === email.to_email.toLowerCase()) ?? recipients[0];
}

/** A report in SES's vocabulary, for the event's data; nulls left out. */
const compact = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined));

/** One report for one envelope recipient: what the batcher writes. */
interface Taken {
  rcpt: string;
  from: string | null;
  key: string;
  report: InboundReport;
  /** A complaint's: who vouches for it, if anyone (only an authenticated complaint counts toward a suspension). */
  authentication?: ComplaintAuthentication;
}

interface Handled {
  recorded?: RecordedActivity;
  /** A bounce or complaint: the project's rates are judged after the commit. */
  judge: boolean;
}

/**
 * What came back to the MX, recorded through the same path as Amazon SES's events (`recordEmailActivity`):
 * a bounce makes the email BOUNCED when it is permanent (and unsubscribes the contact), a transient one
 * is recorded; a complaint unsubscribes; a delay notice or an auto-reply is never a bounce and is kept as
 * `email.received`. Each report is handled once per email. Reports that arrive while others are being
 * recorded are recorded together, in one transaction (answered 250 only after it commits).
 */
export class InboundReports implements MxHandler {
  private readonly batcher: StatementBatcher<Taken, Handled>;

  constructor(private readonly deps: InboundDeps) {
    this.batcher = new StatementBatcher<Taken, Handled>({
      // The batch's events go in one statement at its end (statement triggers once, not per report).
      write: (items) =>
        transaction(this.deps.orm.em.fork(), (tx) =>
          this.deps.ports.insertEventsTogether(tx, async () => {
            const out: Handled[] = [];
            for (const item of items) out.push(await this.handle(tx, item));
            return out;
          }),
        ),
      // Reports of one email are recorded one transaction after another, in the order they came.
      keys: (item) => [this.deps.returnPaths.parse(item.rcpt)?.kind === 'email' ? item.rcpt.toLowerCase() : 'feedback-loop'],
      maxRows: 32,
      maxInFlight: 4,
    });
  }

  /** A valid return path, or the feedback-loop address of a domain some project has verified (of no other). */
  async accepts(address: string): Promise<boolean> {
    const target = this.deps.returnPaths.parse(address);
    if (target?.kind !== 'feedback-loop') return target !== undefined;
    return isVerifiedDomain(this.deps.orm.em.fork(), target.domain);
  }

  async receive(envelope: MxEnvelope, raw: Buffer): Promise<void> {
    const report = await this.deps.reader.read(raw);
    const key = reportKey(raw);
    const dmarc = report.kind === 'complaint' ? await this.deps.authenticity.dmarcDomain(raw, envelope.client, envelope.from) : undefined;
    const handled = await Promise.all(
      envelope.to.map(async (rcpt) => {
        const authentication =
          report.kind !== 'complaint' ? undefined : dmarc ? { method: 'dmarc' as const, domain: dmarc } : await this.fromReceivingServers(rcpt, envelope);
        return this.batcher.write({ rcpt, from: envelope.from, key, report, authentication });
      }),
    );
    for (const h of handled) if (h.recorded) await this.committed(h.recorded, h.judge);
  }

  /**
   * A complaint at an email's own return path, handed over by one of the MX hosts of the domain the email
   * went to: that domain's servers vouch for it (a return path is known only to those who got the mail).
   */
  private async fromReceivingServers(rcpt: string, envelope: MxEnvelope): Promise<ComplaintAuthentication | undefined> {
    const target = this.deps.returnPaths.parse(rcpt);
    if (target?.kind !== 'email') return undefined;
    const to = await emailRecipient(this.deps.orm.em.fork(), target.emailId);
    const domain = to?.slice(to.lastIndexOf('@') + 1).toLowerCase();
    if (!domain || !(await this.deps.authenticity.fromReceivingServers(domain, envelope.client.address))) return undefined;
    return { method: 'receiving-mx', domain };
  }

  /** One report for one recipient, in the batch's transaction. */
  private async handle(tx: EntityManager, item: Taken): Promise<Handled> {
    const target = this.deps.returnPaths.parse(item.rcpt);
    const email =
      target?.kind === 'email'
        ? await this.rememberFor(tx, target.emailId, item)
        : target?.kind === 'feedback-loop'
          ? await this.feedbackLoopEmail(tx, target.domain, item)
          : undefined;
    if (email === 'seen') return { judge: false };
    if (!email) {
      // A report about mail we cannot find: kept for the operator, changes nothing.
      this.deps.log.warn({ rcpt: item.rcpt, kind: item.report.kind, key: item.key }, 'an inbound report names no email of ours');
      await this.remember(tx, undefined, item);
      return { judge: false };
    }
    return this.apply(tx, email, item.report, item.authentication);
  }

  /**
   * The email a return path names, with this report remembered for it in the same statement: 'seen' when
   * it already was (the same report sent again), undefined when there is no such email.
   */
  private async rememberFor(tx: EntityManager, emailId: string, item: Taken): Promise<EmailRef | 'seen' | undefined> {
    const row = await rememberReportFor(tx, emailId, this.logged(item));
    if (!row) return undefined;
    return row.fresh ? row : 'seen';
  }

  /**
   * A report at `fbl@<prefix>.<domain>`: the email its returned original names (its return path, else its Message-ID),
   * only if that email was sent from `domain`, so one sender's feedback-loop address never speaks of another's mail.
   */
  private async feedbackLoopEmail(tx: EntityManager, domain: string, item: Taken): Promise<EmailRef | 'seen' | undefined> {
    const original = item.report.kind === 'unknown' ? undefined : item.report.original;
    const returnPath = original?.returnPath?.replace(/^<|>$/g, '').toLowerCase();
    const inner = returnPath ? this.deps.returnPaths.parse(returnPath) : undefined;
    if (inner?.kind === 'email') {
      // A return path is on its email's own sender domain's host.
      return returnPath!.endsWith(`@${this.deps.returnPaths.host(domain)}`) ? this.rememberFor(tx, inner.emailId, item) : undefined;
    }
    if (!original?.messageId) return undefined;
    const email = await emailByMessageId(tx, original.messageId, domain);
    if (!email) return undefined;
    return (await this.remember(tx, email, item)) ? email : 'seen';
  }

  /** Records that this report was taken for this email (or for none); false when it already was. */
  private async remember(tx: EntityManager, email: EmailRef | undefined, item: Taken): Promise<boolean> {
    return rememberReport(tx, email, this.logged(item));
  }

  /** The report as the log of reports keeps it. */
  private logged(item: Taken): LoggedReport {
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    const printable = (v: string) => v.replace(/[\u0000-\u001F\u007F]/g, '');
    return {
      id: newId(),
      key: item.key,
      kind: item.report.kind,
      from: item.from && printable(item.from),
      to: printable(item.rcpt),
      detail: detailOf(item.report),
    };
  }

  private async apply(tx: EntityManager, email: EmailRef, report: InboundReport, authentication?: ComplaintAuthentication): Promise<Handled> {
    const activity = this.activityOf(email, report, authentication);
    if (activity) return { recorded: await this.deps.ports.recordEmailActivity(tx, email.id, activity, this.deps.rules), judge: true };
    // Not a bounce or complaint: the mail came back some other way (a delay notice, an auto-reply, a reply).
    const outcome = report.kind === 'delay' ? outcomeFor(report.recipients, email) : undefined;
    const data = compact({
      emailId: email.id,
      messageId: email.message_id,
      templateId: email.template_id,
      campaignId: email.campaign_id,
      type: report.kind === 'delay' ? 'delay' : report.kind === 'auto-reply' ? 'auto-reply' : 'other',
      status: outcome?.status,
      diagnosticCode: outcome?.diagnosticCode,
      why: report.kind === 'auto-reply' || report.kind === 'unknown' ? report.why : undefined,
    });
    // A test send to an address that is no contact: there is no contact to record it for.
    const events = email.contact_id
      ? await this.deps.ports.insertEvents(tx, [{ projectId: email.project_id, contactId: email.contact_id, name: 'email.received', data }])
      : [];
    return { recorded: { projectId: email.project_id, contactId: email.contact_id, events }, judge: false };
  }

  private activityOf(email: EmailRef, report: InboundReport, authentication?: ComplaintAuthentication): ReportActivity | undefined {
    if (report.kind === 'complaint') {
      // Every complaint unsubscribes its own contact; only an authenticated one counts toward a suspension.
      return {
        kind: 'complaint',
        details: compact({
          complaintFeedbackType: report.feedbackType,
          userAgent: report.userAgent,
          arrivalDate: report.arrivalDate,
          source: 'inbound',
          authenticated: authentication !== undefined,
          authentication,
        }),
      };
    }
    if (report.kind !== 'bounce') return undefined;
    const outcome = outcomeFor(report.recipients, email);
    if (!outcome || outcome.action === 'delayed') return undefined;
    return {
      kind: 'bounce',
      bounceType: outcome.bounceType,
      details: compact({
        bounceSubType: outcome.subType,
        reason: outcome.reason,
        status: outcome.status,
        diagnosticCode: outcome.diagnosticCode,
        reportingMta: report.reportingMta,
        remoteMta: outcome.remoteMta,
        source: 'inbound',
      }),
    };
  }

  /** After the commit: the events to the hub, and the project's rates judged with this report in them. */
  private async committed(recorded: RecordedActivity, judge: boolean): Promise<void> {
    if (recorded.events.length && recorded.contactId) {
      this.deps.hub.publish({ projectId: recorded.projectId, contactIds: [recorded.contactId], events: recorded.events });
    }
    if (judge && recorded.events.length) await this.deps.ports.judge(recorded.projectId);
  }
}

/** What one report may store: its first recipients, strings cut short, and a cap on the whole. */
const MAX_STORED_RECIPIENTS = 10;
const MAX_STORED_STRING = 1000;
const MAX_STORED_DETAIL = 16 * 1024;

/** What the report said, as stored with it, bounded (a DSN naming 500 recipients stores 10); jsonb cannot hold NUL. */
function detailOf(report: InboundReport): string {
  let kept: Record<string, unknown> = report.kind === 'unknown' ? { why: report.why } : { ...report };
  const recipients = 'recipients' in report ? report.recipients : undefined;
  if (recipients && recipients.length > MAX_STORED_RECIPIENTS) {
    kept = { ...kept, recipients: recipients.slice(0, MAX_STORED_RECIPIENTS), recipientsOmitted: recipients.length - MAX_STORED_RECIPIENTS };
  }
  const cut = (_key: string, v: unknown) => (typeof v === 'string' && v.length > MAX_STORED_STRING ? `${v.slice(0, MAX_STORED_STRING)}…` : v);
  const json = JSON.stringify(kept, cut).replace(/\\u0000/g, '');
  return json.length <= MAX_STORED_DETAIL ? json : JSON.stringify({ kind: report.kind, truncated: true });
}

/** Drops reports older than REPORT_LOG_DAYS (the maintenance schedule's purge). */
export async function purgeInboundReports(em: EntityManager): Promise<number> {
  return em.nativeDelete(InboundReportSchema, { receivedAt: { $lt: new Date(Date.now() - REPORT_LOG_DAYS * 86_400_000) } });
}
