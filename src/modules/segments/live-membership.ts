import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import { transaction } from '../../db/orm';
import type { ActivityHub, ContactActivity } from '../../bus/contact-activity';
import { type EventRecord, insertEvents, type NewEvent } from '../events';
import { evaluateCondition } from './conditions/evaluate';
import { loadContactFacts, loadSegmentRefs } from './conditions/facts';
import { eventNamesOf, topicIdsOf } from './conditions/tree';
import { Segment } from './segments.entity';
import { addToMemberCount, currentMemberships, enterMembers, exitMembers, lockMembership } from './segments.queries';
import { membershipEvents } from './segments.service';

const DEBOUNCE_MS = 50;
const CHUNK = 500;

/**
 * Keeps tracked dynamic segments true as contacts change: every committed change re-evaluates the
 * contacts it touched against the project's tracked segments (in memory, with the same meaning as the
 * SQL), and records `segment.<slug>.entry|exit` for each real transition, within a fraction of a
 * second. Transitions are guarded by the membership rows themselves, so concurrent evaluations, or the
 * background recompute, never emit one twice. Changes a crash drops are caught by that recompute.
 */
export class LiveMembership {
  private pending = new Map<string, Set<string>>();
  private timer?: NodeJS.Timeout;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly orm: MikroORM,
    private readonly hub: ActivityHub,
    private readonly log: Logger,
  ) {
    hub.on(async (a) => this.touched(a));
  }

  private async touched(a: ContactActivity): Promise<void> {
    if (a.contactIds.length === 0 && a.events.length === 0) return;
    const set = this.pending.get(a.projectId) ?? new Set<string>();
    for (const id of a.contactIds) set.add(id);
    for (const e of a.events) set.add(e.contactId);
    this.pending.set(a.projectId, set);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.running = this.running.then(() => this.flush()).catch((err) => this.log.error({ err }, 'live segment membership failed'));
    }, DEBOUNCE_MS);
  }

  /** Waits until everything touched so far was evaluated (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.timer || this.pending.size) {
      await new Promise((r) => setTimeout(r, DEBOUNCE_MS));
      await this.running;
    }
    await this.running;
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    for (const [projectId, ids] of batch) {
      const all = [...ids];
      for (let i = 0; i < all.length; i += CHUNK) await this.evaluate(projectId, all.slice(i, i + CHUNK));
    }
  }

  async evaluate(projectId: string, contactIds: string[]): Promise<EventRecord[]> {
    const em = this.orm.em.fork();
    const tracked = await em.find(Segment, { projectId, type: 'DYNAMIC', trackMembership: true, condition: { $ne: null } }, { orderBy: { id: 'ASC' } });
    if (tracked.length === 0) return [];
    const events = await transaction(em, async (tx) => {
      // Shared with other live evaluations, exclusive with a segment's full recompute.
      for (const s of tracked) await lockMembership(tx, s.id, 'shared');
      const segments = await loadSegmentRefs(tx, projectId);
      const now = Date.now();
      const names = new Set<string>();
      const topics = new Set<string>();
      const addNames = (id: string, seen = new Set<string>()) => {
        const ref = segments.get(id);
        if (!ref?.condition || seen.has(id)) return;
        seen.add(id);
        for (const n of eventNamesOf(ref.condition, now)) names.add(n);
        for (const t of topicIdsOf(ref.condition, now)) topics.add(t);
        for (const g of JSON.stringify(ref.condition).matchAll(/"segment\.([0-9a-f-]{36})"/g)) addNames(g[1], seen);
      };
      for (const s of tracked) addNames(s.id);
      const facts = await loadContactFacts(tx, projectId, contactIds, names, topics);
      const current = await currentMemberships(
        tx,
        tracked.map((s) => s.id),
        contactIds,
      );
      const isMember = new Set(current.map((m) => `${m.segment_id}:${m.contact_id}`));
      const out: NewEvent[] = [];
      for (const segment of tracked) {
        const enter: string[] = [];
        const leave: string[] = [];
        for (const contactId of contactIds) {
          const f = facts.get(contactId);
          if (!f) continue;
          const should = evaluateCondition(segment.condition!, f, { now, segments });
          const is = isMember.has(`${segment.id}:${contactId}`);
          if (should && !is) enter.push(contactId);
          if (!should && is) leave.push(contactId);
        }
        const entered = enter.length ? await enterMembers(tx, segment.id, projectId, enter) : [];
        const exited = leave.length ? await exitMembers(tx, segment.id, leave) : [];
        if (entered.length || exited.length) {
          await addToMemberCount(tx, segment.id, entered.length - exited.length);
          out.push(...membershipEvents(segment, entered, 'entry'), ...membershipEvents(segment, exited, 'exit'));
        }
      }
      return insertEvents(tx, out);
    });
    if (events.length) this.hub.publish({ projectId, contactIds: [], events });
    return events;
  }
}
