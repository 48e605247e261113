import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { ActivityHub } from '../bus/contact-activity';
import { type Orm, transaction } from '../db/orm';
import { SmtpReply } from '../mail/smtp-listener';
import type { MxEnvelope, MxHandler } from './mx-listener';
import type { InboundPorts, RecordedInbound } from './inbound-ports';
import type { ReportReader } from './report-threads';

export interface ReceivedMailDeps {
  orm: Orm;
  /** The inbound-emails module's side (./inbound-ports.ts). */
  ports: Pick<InboundPorts, 'inboundHostDomain' | 'projectsReceivingAt' | 'recordInboundEmail'>;
  hub: ActivityHub;
  reader: ReportReader;
  /** The largest received message stored (INBOUND_EMAIL_MAX_MB); above it, 552. */
  maxBytes: number;
  log: Logger;
}

/**
 * The MX's handler: mail to a verified sender domain's inbound host (`<anything>@inbound.<domain>`) is received
 * mail, stored for the projects that verified the domain; every other address goes to the reports' handler (return
 * paths, feedback loops), which refuses what is not its own, so the MX is never a relay. A bounce, complaint or
 * auto-reply at an inbound host is no customer's mail: it goes to the reports' log, changing nothing.
 */
export class ReceivedMail implements MxHandler {
  constructor(
    private readonly deps: ReceivedMailDeps,
    private readonly reports: MxHandler,
  ) {}

  async accepts(address: string): Promise<boolean> {
    const { inboundHostDomain, projectsReceivingAt } = this.deps.ports;
    const domain = inboundHostDomain(address);
    if (domain === undefined) return this.reports.accepts(address);
    return (await projectsReceivingAt(this.deps.orm.em.fork(), domain)).length > 0;
  }

  async receive(envelope: MxEnvelope, raw: Buffer): Promise<void> {
    const { inboundHostDomain, projectsReceivingAt, recordInboundEmail } = this.deps.ports;
    const received = envelope.to.filter((a) => inboundHostDomain(a) !== undefined);
    const others = envelope.to.filter((a) => inboundHostDomain(a) === undefined);
    if (received.length === 0) return this.reports.receive(envelope, raw);
    if (raw.length > this.deps.maxBytes) {
      throw new SmtpReply(552, `5.3.4 Message too big: mail to an inbound host is stored up to ${this.deps.maxBytes} bytes`);
    }
    const reading = await this.deps.reader.readReceived(raw);
    // A null reverse path is a notification by definition (RFC 5321 §4.5.5), whatever the parser says of it.
    const notMail = reading.report.kind !== 'unknown' || envelope.from === null;
    if (others.length || notMail) await this.reports.receive({ ...envelope, to: notMail ? envelope.to : others }, raw);
    if (notMail) return;
    if (!reading.mail) {
      const why = reading.report.kind === 'unknown' ? reading.report.why : 'unreadable';
      throw new SmtpReply(554, `5.6.0 The message could not be read (${why.slice(0, 200)})`);
    }
    const sender = reading.mail.from ?? envelope.from;
    if (!sender || !/^[^\s@]{1,64}@[^\s@]{1,255}$/.test(sender)) throw new SmtpReply(550, '5.1.7 The message names no usable sender address');

    // Each project that verified a recipient's domain stores the message once, for the first of its recipients.
    const byProject = new Map<string, string>();
    const em = this.deps.orm.em.fork();
    for (const rcpt of received) {
      for (const projectId of await projectsReceivingAt(em, inboundHostDomain(rcpt)!)) if (!byProject.has(projectId)) byProject.set(projectId, rcpt);
    }
    const key = reading.mail.messageId ?? `sha256:${crypto.createHash('sha256').update(raw).digest('hex')}`;
    const recorded = await transaction(em, async (tx) => {
      const out: RecordedInbound[] = [];
      for (const [projectId, envelopeTo] of byProject) {
        const r = await recordInboundEmail(tx, { projectId, sender, key, envelopeFrom: envelope.from, envelopeTo, raw, parsed: reading.mail! });
        if (r) out.push(r);
      }
      return out;
    });
    for (const r of recorded) this.deps.hub.publish({ projectId: r.projectId, contactIds: [r.contactId], events: r.events });
  }
}
