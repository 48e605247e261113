import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';

/** The projects that have verified `domain` (lower-case) as a sender domain: mail to its inbound host is theirs. */
export async function projectsWithVerifiedDomain(em: EntityManager, domain: string): Promise<string[]> {
  const rows = await sql<{ project_id: string }>(em, `SELECT project_id FROM domains WHERE domain = ? AND status = 'verified' ORDER BY verified_at, id`, [
    domain,
  ]);
  return rows.map((r) => r.project_id);
}

/**
 * The project's sent email whose Message-ID is among `messageIds`, the first listed winning (In-Reply-To before
 * References, References from the most recent): one statement over emails' message_id index.
 */
export async function emailAnswered(em: EntityManager, projectId: string, messageIds: string[]): Promise<string | null> {
  if (messageIds.length === 0) return null;
  const [row] = await sql<{ id: string }>(
    em,
    `SELECT id FROM emails WHERE message_id = ANY(?::text[]) AND project_id = ? ORDER BY array_position(?::text[], message_id), created_at DESC LIMIT 1`,
    [messageIds, projectId, messageIds],
  );
  return row?.id ?? null;
}

export interface InboundEmailRow {
  id: string;
  projectId: string;
  messageKey: string;
  from: string;
  to: string[];
  cc: string[];
  subject: string;
  text: string | null;
  html: string | null;
  headers: unknown[];
  attachments: unknown[];
  emailId: string | null;
  contactId: string;
  envelopeFrom: string | null;
  envelopeTo: string;
  raw: Buffer;
}

/** Stores a received message once per project and key (`ON CONFLICT DO NOTHING`): the new row's id, nothing when it was stored already. */
export async function insertInboundEmail(em: EntityManager, r: InboundEmailRow): Promise<string | undefined> {
  const [row] = await sql<{ id: string }>(
    em,
    `INSERT INTO inbound_emails (id, project_id, message_key, from_address, to_addresses, cc_addresses, subject, text, html, headers, attachments,
       email_id, contact_id, envelope_from, envelope_to, size_bytes, raw)
     VALUES (?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (project_id, message_key) DO NOTHING RETURNING id`,
    [
      r.id,
      r.projectId,
      r.messageKey,
      r.from,
      JSON.stringify(r.to),
      JSON.stringify(r.cc),
      r.subject,
      r.text,
      r.html,
      JSON.stringify(r.headers),
      JSON.stringify(r.attachments),
      r.emailId,
      r.contactId,
      r.envelopeFrom,
      r.envelopeTo,
      r.raw.length,
      r.raw,
    ],
  );
  return row?.id;
}
