import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { DkimKey } from '../mail/dkim';
import { signingDomains } from './delivery.queries';
import type { DeliveryPorts } from './delivery-ports';
import { type QueuedEmail, senderOf } from './queued-email';

/** Each sender domain's DKIM key, read with every batch; parsed keys kept by the hash of their PEM. */
export class SigningKeys {
  /** Parsed DKIM keys by the SHA-256 of their PEM. */
  private readonly parsedKeys = new Map<string, crypto.KeyObject>();

  constructor(private readonly returnPathVerified: DeliveryPorts['returnPathVerified']) {}

  /**
   * The DKIM key of each sender domain in the batch, and which have their return path published, read with the batch (one query) so a domain
   * deleted and added again signs with its new key at once. Parsing a PEM costs more than signing, so
   * parsed keys are kept, by the PEM's own hash: a new key is a new entry, never a stale hit.
   */
  async of(em: EntityManager, batch: QueuedEmail[]): Promise<{ keys: Map<string, DkimKey>; returnPaths: Set<string> }> {
    const senders = [...new Set(batch.map(senderOf))];
    const rows = await signingDomains(em, senders);
    const found = new Map<string, DkimKey>();
    const returnPaths = new Set<string>();
    for (const row of rows) {
      if (this.returnPathVerified(row.record_status)) returnPaths.add(`${row.project_id}:${row.domain}`);
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
