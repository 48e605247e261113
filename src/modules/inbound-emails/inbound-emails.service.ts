import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { notFound } from '../../errors';
import { upsertContact } from '../contacts';
import { type EventRecord, insertEvents } from '../events';
import { InboundEmail } from './inbound-emails.entity';
import { emailAnswered, insertInboundEmail, projectsWithVerifiedDomain } from './inbound-emails.queries';
import type { InboundEmailListQuery } from './inbound-emails.schemas';
import type { ReceivedMessage } from '../../inbound/received-message';

/** Each sender domain receives mail at `inbound.<domain>`. */
export const INBOUND_HOST_LABEL = 'inbound';

/** The sender domain whose inbound host `address` is at (lower-case), or undefined. */
export function inboundHostDomain(address: string): string | undefined {
  const host = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
  if (!address.includes('@') || !host.startsWith(`${INBOUND_HOST_LABEL}.`)) return undefined;
  const domain = host.slice(INBOUND_HOST_LABEL.length + 1);
  return domain.includes('.') ? domain : undefined;
}

/** The projects that receive mail for `domain`: every project that verified it (each proved it owns it). */
export const projectsReceivingAt = (em: EntityManager, domain: string) => projectsWithVerifiedDomain(em, domain);

/** A received message as the inbound engine reads it, off the main thread: every string already free of NUL and well-formed. */
export type ParsedReceived = ReceivedMessage;

export interface RecordedInbound {
  projectId: string;
  contactId: string;
  events: EventRecord[];
}

/**
 * Stores a received message for a project, in the caller's transaction: the sender's contact (created unsubscribed
 * when new), the sent email it answers, and an `email.received` event. Nothing when the same message was stored
 * already (a relay sending it again).
 */
export async function recordInboundEmail(
  tx: EntityManager,
  r: { projectId: string; sender: string; key: string; envelopeFrom: string | null; envelopeTo: string; raw: Buffer; parsed: ParsedReceived },
): Promise<RecordedInbound | undefined> {
  const { contact } = await upsertContact(tx, r.projectId, { email: r.sender, defaultSubscribed: false, data: { set: {}, unset: [] } });
  const emailId = await emailAnswered(tx, r.projectId, r.parsed.answers);
  const p = r.parsed;
  const id = await insertInboundEmail(tx, {
    id: newId(),
    projectId: r.projectId,
    messageKey: r.key,
    from: r.sender,
    to: p.to,
    cc: p.cc,
    subject: p.subject,
    text: p.text,
    html: p.html,
    headers: p.headers,
    attachments: p.attachments,
    emailId,
    contactId: contact.id,
    envelopeFrom: r.envelopeFrom,
    envelopeTo: r.envelopeTo,
    raw: r.raw,
  });
  if (!id) return undefined;
  const events = await insertEvents(tx, [
    { projectId: r.projectId, contactId: contact.id, name: 'email.received', data: { inboundEmailId: id, emailId, subject: p.subject, from: r.sender } },
  ]);
  return { projectId: r.projectId, contactId: contact.id, events };
}

export const toInboundEmailDto = (e: InboundEmail) => ({
  id: e.id,
  from: e.from,
  to: e.to,
  cc: e.cc,
  subject: e.subject,
  text: e.text,
  html: e.html,
  headers: e.headers,
  attachments: e.attachments,
  emailId: e.emailId,
  receivedAt: e.receivedAt.toISOString(),
});

/** GET /inbound-emails: newest first, offset pagination. */
export async function listInboundEmails(em: EntityManager, projectId: string, q: InboundEmailListQuery) {
  const [rows, total] = await em.findAndCount(
    InboundEmail,
    { projectId },
    { orderBy: [{ receivedAt: 'DESC' }, { id: 'DESC' }], limit: q.pageSize, offset: (q.page - 1) * q.pageSize },
  );
  return { data: rows.map(toInboundEmailDto), total, page: q.page, pageSize: q.pageSize, totalPages: Math.ceil(total / q.pageSize) };
}

export async function getInboundEmail(em: EntityManager, projectId: string, id: string): Promise<InboundEmail> {
  const row = await em.findOne(InboundEmail, { projectId, id });
  if (!row) throw notFound('Inbound email');
  return row;
}

/** GET /inbound-emails/:id/raw: the message as it came. */
export async function rawInboundEmail(em: EntityManager, projectId: string, id: string): Promise<Buffer> {
  const row = await em.findOne(InboundEmail, { projectId, id }, { populate: ['raw'] });
  if (!row) throw notFound('Inbound email');
  return row.raw;
}

/** Drops received messages older than the retention (the maintenance schedule's purge). */
export async function purgeInboundEmails(em: EntityManager, retentionDays: number): Promise<number> {
  return em.nativeDelete(InboundEmail, { receivedAt: { $lt: new Date(Date.now() - retentionDays * 86_400_000) } });
}
