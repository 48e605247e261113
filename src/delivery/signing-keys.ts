import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../db/orm';
import type { DkimKey } from '../mail/dkim';
import { type Domain, returnPathVerified } from '../modules/domains';
import { type QueuedEmail, senderOf } from './queued-email';

/** Each sender domain's DKIM key, read with every batch; parsed keys kept by the hash of their PEM. */
export class SigningKeys {
  /** Parsed DKIM keys by the SHA-256 of their PEM. */
  private readonly parsedKeys = new Map<string, crypto.KeyObject>();

  /**
   * The DKIM key of each sender domain in the batch, and which have their return path published, read with the batch (one query) so a domain
   * deleted and added again signs with its new key at once. Parsing a PEM costs more than signing, so
   * parsed keys are kept, by the PEM's own hash: a new key is a new entry, never a stale hit.
   */
  async of(em: EntityManager, batch: QueuedEmail[]): Promise<{ keys: Map<string, DkimKey>; returnPaths: Set<string> }> {
    const senders = [...new Set(batch.map(senderOf))];
    const rows = await sql<{ project_id: string; domain: string; dkim_selector: string; dkim_private_key: string; record_status: Domain['recordStatus'] }>(
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
}
