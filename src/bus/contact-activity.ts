import type { Logger } from 'pino';

/** A recorded event, as listeners and API answers see it. */
export interface EventRecord {
  id: string;
  name: string;
  contactId: string;
  data: Record<string, unknown>;
  createdAt: string;
}

/** Something happened to some contacts of a project (changed fields, recorded events), already committed. */
export interface ContactActivity {
  projectId: string;
  contactIds: string[];
  events: EventRecord[];
}

export type ActivityListener = (activity: ContactActivity) => Promise<void>;

/**
 * In-process fan-out of committed contact activity to what reacts to it (live segment membership,
 * automation triggers). Listeners run after the response path and never fail it; what must not be
 * lost when a process dies has a durable path of its own (the segments' background recompute).
 */
export class ActivityHub {
  private readonly listeners: ActivityListener[] = [];

  constructor(private readonly log: Logger) {}

  on(listener: ActivityListener): void {
    this.listeners.push(listener);
  }

  publish(activity: ContactActivity): void {
    if (activity.contactIds.length === 0 && activity.events.length === 0) return;
    for (const listener of this.listeners) {
      listener(activity).catch((err) => this.log.error({ err, projectId: activity.projectId }, 'contact activity listener failed'));
    }
  }
}
