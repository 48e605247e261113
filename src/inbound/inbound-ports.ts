import type { EntityManager } from '@mikro-orm/postgresql';
import type { EventRecord } from '../bus/contact-activity';
import type { ReceivedMessage } from './received-message';

/**
 * What inbound needs of the modules, declared here so it imports none: main.ts hands it an implementation
 * built from the modules (src/engine-ports.ts). Each is called once per report or message, never per byte.
 */
export interface InboundPorts {
  /** Records a bounce or complaint for an email, in `tx`, through the path Amazon SES's events take. */
  recordEmailActivity(tx: EntityManager, emailId: string, activity: ReportActivity, rules: { softBounceLimit: number }): Promise<RecordedActivity | undefined>;
  /** Writes events (`email.received`) in `tx`. */
  insertEvents(tx: EntityManager, events: NewEvent[]): Promise<EventRecord[]>;
  /** Runs `fn` with every event it writes held back and inserted in one statement at its end. */
  insertEventsTogether<T>(tx: EntityManager, fn: () => Promise<T>): Promise<T>;
  /** Judges a project's bounce and complaint rates once new reports are committed. */
  judge(projectId: string): Promise<void>;
  /** The verified domain whose inbound host `address` is at (`<anything>@inbound.<domain>`), if it is at one. */
  inboundHostDomain(address: string): string | undefined;
  /** The projects that receive mail for `domain`. */
  projectsReceivingAt(em: EntityManager, domain: string): Promise<string[]>;
  /** Stores a received message for a project in `tx`; nothing when it was stored already. */
  recordInboundEmail(tx: EntityManager, received: ReceivedForProject): Promise<RecordedInbound | undefined>;
}

/** What a returned report says happened to an email. */
export type ReportActivity =
  | { kind: 'bounce'; bounceType: 'Permanent' | 'Transient' | 'Undetermined'; details: Record<string, unknown> }
  | { kind: 'complaint'; details: Record<string, unknown> };

export interface RecordedActivity {
  projectId: string;
  /** Null for a test send to an address that is no contact. */
  contactId: string | null;
  events: EventRecord[];
}

export interface NewEvent {
  projectId: string;
  contactId: string;
  name: string;
  data: Record<string, unknown>;
}

export interface ReceivedForProject {
  projectId: string;
  sender: string;
  key: string;
  envelopeFrom: string | null;
  envelopeTo: string;
  raw: Buffer;
  parsed: ReceivedMessage;
}

export interface RecordedInbound {
  projectId: string;
  contactId: string;
  events: EventRecord[];
}
