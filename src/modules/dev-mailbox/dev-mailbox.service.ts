import type { EntityManager } from '@mikro-orm/postgresql';
import { simpleParser, type AddressObject } from 'mailparser';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { notFound } from '../../http/errors';
import type { CapturedMessage } from '../../mail/capture-smtp';

interface Row {
  id: string;
  received_at: Date;
  envelope_from: string | null;
  envelope_to: string[];
  raw: Buffer;
}

const addresses = (a: AddressObject | AddressObject[] | undefined) =>
  (Array.isArray(a) ? a : a ? [a] : []).flatMap((o) => o.value.map((v) => ({ name: v.name, address: v.address })));

export async function storeCaptured(em: EntityManager, msg: CapturedMessage): Promise<void> {
  const parsed = await simpleParser(msg.raw, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true });
  await sql(em, `INSERT INTO dev_mailbox_messages (id, envelope_from, envelope_to, subject, message_id, raw) VALUES (?, ?, ?, ?, ?, ?)`, [
    newId(),
    msg.envelopeFrom,
    msg.envelopeTo,
    parsed.subject ?? null,
    parsed.messageId ?? null,
    msg.raw,
  ]);
}

async function present(row: Row) {
  const m = await simpleParser(row.raw, { skipImageLinks: true });
  return {
    id: row.id,
    receivedAt: new Date(row.received_at).toISOString(),
    envelope: { from: row.envelope_from, to: row.envelope_to },
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
  const rows = await sql<Row>(
    em,
    `SELECT id, received_at, envelope_from, envelope_to, raw FROM dev_mailbox_messages
     WHERE (?::text IS NULL OR ?::text = ANY(envelope_to)) ORDER BY received_at DESC, id DESC LIMIT ?`,
    [opts.to ?? null, opts.to ?? null, opts.limit],
  );
  const [{ n }] = await sql<{ n: string }>(em, `SELECT count(*) AS n FROM dev_mailbox_messages`);
  return { data: await Promise.all(rows.map(present)), total: Number(n) };
}

export async function getCaptured(em: EntityManager, id: string, raw = false) {
  const [row] = await sql<Row>(em, `SELECT id, received_at, envelope_from, envelope_to, raw FROM dev_mailbox_messages WHERE id = ?`, [id]);
  if (!row) throw notFound('Message');
  return raw ? row.raw : present(row);
}

export async function clearCaptured(em: EntityManager): Promise<number> {
  const [row] = await sql<{ n: number }>(em, `WITH d AS (DELETE FROM dev_mailbox_messages RETURNING 1) SELECT count(*)::int AS n FROM d`);
  return row.n;
}
