import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { AutomationEvent, WorkflowStarter } from '../workflow-starter';
import type { QueueSignal } from '../../db/work-queue';
import { AutomationOutboxEntry } from './automation-outbox.entity';
import { claimOutbox, outboxNextDue, stillWaiting } from './automations.queries';
import { startExecution } from './executions.service';
import { Automation } from './automations.entity';

/** NOTIFYed by the events trigger when it routes an event to automations (see the automations migration). */
export const AUTOMATION_OUTBOX_CHANNEL = 'postbox_automation_outbox';

const CLAIM_SECONDS = 60;
const BATCH = 200;
const CONCURRENCY = 32;

/**
 * Turns recorded events into automation: every outbox row is an event that starts an enabled
 * workflow (with an execution id derived from the two, so it starts once) or wakes an execution
 * waiting for it. Rows are written by a trigger in the event's own transaction, claimed here with
 * SKIP LOCKED, and deleted once handled, so nothing is lost when a process dies in between.
 */
export class AutomationDispatcher {
  constructor(private readonly deps: { orm: MikroORM; temporal: WorkflowStarter; queue: QueueSignal; log: Logger }) {}

  /** Handles the outbox until it has been empty for `idleMs` (or `maxMs` passed); then says when a claimed row expires. */
  async drain(opts: {
    idleMs: number;
    maxMs: number;
    heartbeat: () => void;
    signal?: AbortSignal;
  }): Promise<{ started: number; woken: number; idle: boolean; nextDueInSeconds: number | null }> {
    const report = { started: 0, woken: 0 };
    const { idle } = await this.deps.queue.drain(opts, async () => {
      const rows = await claimOutbox(this.deps.orm.em.fork(), BATCH, CLAIM_SECONDS);
      // Wake-ups for executions that no longer wait for that event are dropped in one query.
      const waiting = await stillWaiting(
        this.deps.orm.em.fork(),
        rows.filter((r) => r.kind === 'wake').map((r) => ({ executionId: r.executionId!, eventName: r.eventName })),
      );
      const handled: string[] = [];
      let next = 0;
      const worker = async () => {
        while (next < rows.length) {
          const row = rows[next++];
          try {
            if (row.kind === 'start' ? await this.start(row) : waiting.has(row.executionId!) && (await this.wake(row))) {
              report[row.kind === 'start' ? 'started' : 'woken']++;
            }
            handled.push(row.id);
          } catch (err) {
            // Left claimed: tried again when the claim expires.
            this.deps.log.warn({ err, outboxId: row.id }, 'automation outbox row failed; will retry');
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(CONCURRENCY, rows.length) }, worker));
      if (handled.length) await this.deps.orm.em.fork().nativeDelete(AutomationOutboxEntry, { id: { $in: handled } });
      return rows.length;
    });
    const due = await outboxNextDue(this.deps.orm.em.fork());
    return { ...report, idle, nextDueInSeconds: due === null ? null : Math.max(0, due) };
  }

  /** A disabled (or deleted) workflow starts nothing; re-entry rules are applied by startExecution. */
  private async start(row: AutomationOutboxEntry): Promise<boolean> {
    const em = this.deps.orm.em.fork();
    const w = await em.findOne(Automation, { projectId: row.projectId, id: row.workflowId!, enabled: true });
    if (!w) return false;
    const x = await startExecution(em, this.deps.temporal, w, {
      contactId: row.contactId,
      triggerEventId: row.eventId,
      context: { ...row.eventData, trigger: { eventId: row.eventId, eventName: row.eventName } },
    });
    return !!x;
  }

  /** Signals the waiting execution (false if it has ended meanwhile). */
  private async wake(row: AutomationOutboxEntry): Promise<boolean> {
    const event: AutomationEvent = { id: row.eventId, name: row.eventName, data: row.eventData };
    return this.deps.temporal.signalAutomationEvent(row.executionId!, event);
  }
}
