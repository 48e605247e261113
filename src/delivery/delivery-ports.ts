import type { EntityManager } from '@mikro-orm/postgresql';
import type { EventRecord } from '../bus/contact-activity';
import type { MailSettings } from '../mail/compose';

/**
 * What delivery needs of the modules, declared here so it imports none: main.ts hands the engine an
 * implementation built from the modules (src/engine-ports.ts). The SQL fragments are taken once, when
 * the engine is built, so the statements run per batch cost what they did when they named the modules.
 */
export interface DeliveryPorts {
  /**
   * SQL that says whether the address `email` of project `project` (two SQL expressions) is suppressed:
   * a jsonb `SuppressionVerdict`, or NULL. Spliced into the claim and the campaign chunk's read.
   */
  suppressionSql(email: string, project: string): string;
  /** What a suppressed email's `last_error` says. */
  suppressedError(verdict: SuppressionVerdict): string;
  /** The event columns an `INSERT INTO events … RETURNING` reads, and the record each returned row becomes. */
  eventColumns: string;
  toEventRecord(row: ReturnedEvent): EventRecord;
  /** Whether a sender domain's return-path records are verified, from its `record_status` column. */
  returnPathVerified(recordStatus: RecordStatusColumn): boolean;
  /** A project's settings, as a campaign draft is rendered with them. */
  projectSettings(em: EntityManager, projectId: string): Promise<MailSettings>;
  /**
   * Records a 5xx about the recipient, refused during the SMTP session, as a bounce through the path every
   * provider's report takes (in `tx`); answers the events it wrote.
   */
  recordRefusal(tx: EntityManager, emailId: string, bounce: RefusalBounce, rules: { softBounceLimit: number }): Promise<EventRecord[]>;
}

/** Why an address gets no mail, as `suppressionSql` reads it. */
export interface SuppressionVerdict {
  reason: string;
  ruleId?: string;
}

/** A row read `RETURNING ${eventColumns}`. */
export interface ReturnedEvent {
  id: string;
  name: string;
  contactId: string;
  data: Record<string, unknown> | null;
  createdAt: Date | string;
}

/** A domain's `record_status` column: each DNS record's last check. */
export type RecordStatusColumn = Record<string, { status: string }> | null;

export interface RefusalBounce {
  bounceType: 'Permanent' | 'Transient';
  details: Record<string, unknown>;
}
