import type { MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from 'pino';
import type { TemporalClient } from '../../../temporal/client';
import { workflowIds } from '../../../temporal/workflow-ids';
import { automationEventSignal } from '../../../temporal/workflows/automation';
import { sql } from '../../db/orm';
import type { QueueSignal } from '../../db/work-queue';
import { startExecution } from './executions.service';
import type { WorkflowRow } from './automations.service';

/** NOTIFYed by the events trigger when it routes an event to automations (see the automations migration). */
export const AUTOMATION_OUTBOX_CHANNEL = 'postbox_automation_outbox';

export interface AutomationEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
}

interface OutboxRow {
  id: string;
  kind: 'start' | 'wake';
  project_id: string;
  contact_id: string;
  event_id: string;
  event_name: string;
  event_data: Record<string, unknown>;
  workflow_id: string | null;
  execution_id: string | null;
}

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
  constructor(private readonly deps: { orm: MikroORM; temporal: TemporalClient; queue: QueueSignal; log: Logger }) {}

  /** Handles the outbox until it has been empty for `idleMs` (or `maxMs` passed); then says when a claimed row expires. */
  async drain(opts: {
    idleMs: number;
    maxMs: number;
    heartbeat: () => void;
    signal?: AbortSignal;
  }): Promise<{ started: number; woken: number; idle: boolean; nextDueInSeconds: number | null }> {
    const report = { started: 0, woken: 0 };
    const { idle } = await this.deps.queue.drain(opts, async () => {
      const rows = await sql<OutboxRow>(
        this.deps.orm.em.fork(),
        `WITH due AS (
           SELECT id FROM automation_outbox WHERE claimed_until IS NULL OR claimed_until < now()
           ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED
         )
         UPDATE automation_outbox o SET claimed_until = now() + make_interval(secs => ?) FROM due WHERE o.id = due.id RETURNING o.*`,
        [BATCH, CLAIM_SECONDS],
      );
      // Wake-ups for executions that no longer wait for that event are dropped in one query.
      const wakes = rows.filter((r) => r.kind === 'wake');
      const waiting = new Set(
        wakes.length
          ? (
              await sql<{ execution_id: string }>(
                this.deps.orm.em.fork(),
                `SELECT w.execution_id FROM workflow_waits w JOIN unnest(?::uuid[], ?::text[]) AS v(execution_id, event_name)
                   ON w.execution_id = v.execution_id AND w.event_name = v.event_name`,
                [wakes.map((r) => r.execution_id), wakes.map((r) => r.event_name)],
              )
            ).map((w) => w.execution_id)
          : [],
      );
      const handled: string[] = [];
      let next = 0;
      const worker = async () => {
        while (next < rows.length) {
          const row = rows[next++];
          try {
            if (row.kind === 'start' ? await this.start(row) : waiting.has(row.execution_id!) && (await this.wake(row))) {
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
      if (handled.length) await sql(this.deps.orm.em.fork(), `DELETE FROM automation_outbox WHERE id = ANY(?::bigint[])`, [handled]);
      return rows.length;
    });
    const [next] = await sql<{ due: number | null }>(
      this.deps.orm.em.fork(),
      `SELECT extract(epoch FROM min(coalesce(claimed_until, now())) - now())::float AS due FROM automation_outbox`,
    );
    return { ...report, idle, nextDueInSeconds: next.due === null ? null : Math.max(0, next.due) };
  }

  /** A disabled (or deleted) workflow starts nothing; re-entry rules are applied by startExecution. */
  private async start(row: OutboxRow): Promise<boolean> {
    const em = this.deps.orm.em.fork();
    const [w] = await sql<WorkflowRow>(em, `SELECT * FROM workflows WHERE id = ? AND enabled`, [row.workflow_id]);
    if (!w) return false;
    const x = await startExecution(em, this.deps.temporal, w, {
      contactId: row.contact_id,
      triggerEventId: row.event_id,
      context: { ...row.event_data, trigger: { eventId: row.event_id, eventName: row.event_name } },
    });
    return !!x;
  }

  /** Signals the waiting execution (false if it has ended meanwhile). */
  private async wake(row: OutboxRow): Promise<boolean> {
    const event: AutomationEvent = { id: row.event_id, name: row.event_name, data: row.event_data };
    try {
      await this.deps.temporal.client.workflow.getHandle(workflowIds.automation(row.execution_id!)).signal(automationEventSignal, event);
      return true;
    } catch (err) {
      if ((err as Error).name === 'WorkflowNotFoundError') return false;
      throw err;
    }
  }
}
