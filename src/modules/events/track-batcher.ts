import type { Orm } from '../../db/orm';
import { StatementBatcher } from '../../db/statement-batcher';
import { type ContactEventInput, upsertContactsAndInsertEvents } from '../contacts';
import type { EventRecord } from './events.store';

/**
 * Writes the tracks of concurrent requests together (`StatementBatcher`): up to `maxBatch` contacts
 * and their events in one statement; a (project, email) is written by one statement at a time, so a
 * later track of the same contact waits for the next.
 */
export class TrackBatcher extends StatementBatcher<ContactEventInput, { contactId: string; event: EventRecord }> {
  constructor(orm: Orm, maxBatch = 200, maxInFlight = 2) {
    super({
      write: (items) => upsertContactsAndInsertEvents(orm.em.fork(), items),
      keys: (item) => [`${item.projectId} ${item.email}`],
      maxRows: maxBatch,
      maxInFlight,
    });
  }
}
