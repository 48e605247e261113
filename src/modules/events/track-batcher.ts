import type { Orm } from '../../db/orm';
import { type ContactEventInput, upsertContactsAndInsertEvents } from '../contacts/contacts.service';
import type { EventRecord } from './events.store';

interface Pending {
  item: ContactEventInput;
  resolve: (r: { contactId: string; event: EventRecord }) => void;
  reject: (err: unknown) => void;
}

/**
 * Writes the tracks of concurrent requests together: what arrives while a statement runs joins the
 * next one, so under load PostgreSQL sees one statement and one commit per batch rather than per
 * request, and at low load a batch is a single request that waits for nothing. Each request still
 * answers only after its own row is committed. A (project, email) is written at most once per
 * statement; a later track of the same contact waits for the next. A batch that fails is retried one
 * item at a time, so a bad item fails alone.
 */
export class TrackBatcher {
  private queue: Pending[] = [];
  private inFlight = 0;

  constructor(
    private readonly orm: Orm,
    private readonly maxBatch = 200,
    private readonly maxInFlight = 2,
  ) {}

  write(item: ContactEventInput): Promise<{ contactId: string; event: EventRecord }> {
    return new Promise((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const batch = this.take();
      this.inFlight++;
      void this.flush(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /** The oldest pending items, one per contact, up to maxBatch; the rest keep their order. */
  private take(): Pending[] {
    const contacts = new Set<string>();
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    for (const p of this.queue) {
      const key = `${p.item.projectId} ${p.item.email}`;
      if (batch.length < this.maxBatch && !contacts.has(key)) {
        contacts.add(key);
        batch.push(p);
      } else rest.push(p);
    }
    this.queue = rest;
    return batch;
  }

  private async flush(batch: Pending[]): Promise<void> {
    try {
      const results = await upsertContactsAndInsertEvents(this.orm.em.fork(), batch.map((p) => p.item));
      batch.forEach((p, i) => p.resolve(results[i]));
    } catch (err) {
      if (batch.length === 1) return batch[0].reject(err);
      for (const p of batch) {
        await upsertContactsAndInsertEvents(this.orm.em.fork(), [p.item]).then(([r]) => p.resolve(r), p.reject);
      }
    }
  }
}
