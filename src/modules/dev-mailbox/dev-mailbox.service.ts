import type { EntityManager } from '@mikro-orm/postgresql';
import { simpleParser, type AddressObject } from 'mailparser';
import { newId } from '../../db/ids';
import { notFound } from '../../errors';
import type { CapturedMessage } from '../../mail/capture-smtp';
import { DevMailboxMessage } from './dev-mailbox.entity';

const addresses = (a: AddressObject | AddressObject[] | undefined) =>
  (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value.map((v) => ({ name: v.name, address: v.address })));

export async function storeCaptured(em: EntityManager, msg: CapturedMessage): Promise<void> {
  const parsed = await simpleParser(msg.raw, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
  // A plain insert: nothing reads the message back in this unit of work.
  await em.insert(DevMailboxMessage, {
    id: newId(),
    envelopeFrom: msg.envelopeFrom,
    envelopeTo: msg.envelopeTo,
    subject: parsed.subject ?? null,
    messageId: parsed.messageId ?? null,
    raw: msg.raw,
  });
}

async function present(row: DevMailboxMessage) {
  const m = await simpleParser(row.raw, { skipImageLinks: true });
  return {
    id: row.id,
    receivedAt: row.receivedAt.toISOString(),
    envelope: { from: row.envelopeFrom, to: row.envelopeTo },
    messageId: m.messageId ?? null,
    subject: m.subject ?? null,
    from: addresses(m.from),
    to: addresses(m.to),
    replyTo: addresses(m.replyTo),
    date: m.date?.toISOString() ?? null,
    headers: Object.fromEntries([...m.headerLines].map((h) => [h.key, h.line.slice(h.key.length + 1).trim()])),
    text: m.text ?? null,
    html: typeof m.html === 'string' ? m.html : null,
    attachments: m.attachments.map((a) => ({
      filename: a.filename ?? null,
      contentType: a.contentType,
      contentId: a.contentId ?? null,
      disposition: a.contentDisposition ?? null,
      size: a.size,
    })),
    size: row.raw.length,
  };
}

/** Newest first. `to` narrows to messages whose envelope includes that recipient. */
export async function listCaptured(em: EntityManager, opts: { limit: number; to?: string }) {
  const rows = await em.find(DevMailboxMessage, opts.to ? { envelopeTo: { $contains: [opts.to] } } : {}, {
    orderBy: { receivedAt: 'desc', id: 'desc' },
    limit: opts.limit,
  });
  const total = await em.count(DevMailboxMessage);
  return { data: await Promise.all(rows.map(present)), total };
}

export async function getCaptured(em: EntityManager, id: string, raw = false) {
  const row = await em.findOne(DevMailboxMessage, { id });
  if (!row) throw notFound('Message');
  return raw ? row.raw : present(row);
}

export async function clearCaptured(em: EntityManager): Promise<number> {
  return em.nativeDelete(DevMailboxMessage, {});
}
