import { Context } from '@temporalio/activity';
import { WorkflowFailedError, type WorkflowHandleWithFirstExecutionRunId, WorkflowUpdateFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import type { CampaignChunk } from '../../src/delivery';
import { campaignChunkQueue, workflowIds } from '../../temporal/workflow-ids';
import { campaignSendWorkflow } from '../../temporal/workflows';
import { abWinnerChosenSignal, rescheduleUpdate, type CampaignSendInput } from '../../temporal/workflows/campaign-send.workflow';
import { DAY, eventually, gate, HOUR, type HistoryEvent, type MockActivities, runsOf, scheduledAt, uid, withWorkers, workflowTestEnv } from './env';

const t = workflowTestEnv();

/** CHUNKS_PER_RUN in campaign-send.workflow.ts. */
const CHUNKS_PER_RUN = 100;

/**
 * A campaign's queue as its activities see it: recipients by contact id, each QUEUED (and due at a
 * time) until a chunk sends it. A recipient in `refuseOnce` is sent back by a 4xx the first time, due
 * again that many seconds later. Every call is logged, with the server time it ran at.
 */
class FakeCampaign {
  readonly campaignId = uid('campaign');
  /** Contact id → when (server time) it is due; only QUEUED recipients are here. */
  readonly queued = new Map<string, number>();
  readonly sent: Array<{ id: string; at: number }> = [];
  readonly log: Array<{ call: string; at: number; chunk?: CampaignChunk; after?: string | null; queue?: string; run?: string }> = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Holds every delivery until the test lets it go (undefined: deliveries finish at once). */
  hold?: Promise<void>;
  /** Holds startCampaignSend (sending has begun) until the test lets it go. */
  holdStart?: Promise<void>;
  /** What every delivery answers about the campaign (no longer SENDING: stopped). */
  stopped = false;
  proceed = true;
  /** An A/B test: `held` is not queued until decideAbWinner; a manual test has no winner until `chosen`. */
  ab?: { waitMinutes: number; held: string[]; manual: boolean; chosen?: boolean };

  constructor(
    recipients: number,
    readonly size: number,
    readonly parallelism: number,
    readonly refuseOnce = new Map<string, number>(),
  ) {
    for (let i = 0; i < recipients; i++) this.queued.set(FakeCampaign.id(i), 0);
  }

  static id(i: number): string {
    return `c${String(i).padStart(5, '0')}`;
  }

  calls(name: string) {
    return this.log.filter((l) => l.call === name);
  }

  activities(): MockActivities {
    return {
      startCampaignSend: async () => {
        this.log.push({ call: 'startCampaignSend', at: scheduledAt() });
        await this.holdStart;
        return { proceed: this.proceed, recipients: this.queued.size, ...(this.ab ? { abWaitMinutes: this.ab.waitMinutes } : {}) };
      },
      holdAbTest: async () => {
        this.log.push({ call: 'holdAbTest', at: scheduledAt() });
      },
      decideAbWinner: async () => {
        const now = scheduledAt();
        this.log.push({ call: 'decideAbWinner', at: now });
        if (this.ab!.manual && !this.ab!.chosen) return { winner: null, stopped: false };
        for (const id of this.ab!.held.splice(0)) this.queued.set(id, now);
        return { winner: 'B', stopped: false };
      },
      planCampaignChunks: async ({ after }) => {
        const now = scheduledAt();
        this.log.push({ call: 'planCampaignChunks', at: now, after, run: Context.current().info.workflowExecution?.runId });
        // As the real plan: due recipients after `after` by contact id, `parallelism` chunks of `size`.
        const ids = [...this.queued]
          .filter(([id, due]) => due <= now && (after === null || id > after))
          .map(([id]) => id)
          .sort()
          .slice(0, this.size * this.parallelism);
        const chunks: CampaignChunk[] = [];
        for (let i = 0; i < ids.length; i += this.size)
          chunks.push({ after: i === 0 ? after : ids[i - 1], upTo: ids[Math.min(i + this.size, ids.length) - 1] });
        if (chunks.length) return { chunks, parallelism: this.parallelism, remaining: null, nextDueInSeconds: null };
        const dues = [...this.queued.values()];
        return {
          chunks,
          parallelism: this.parallelism,
          remaining: dues.length,
          nextDueInSeconds: dues.length ? Math.max(0, (Math.min(...dues) - now) / 1000) : null,
        };
      },
      completeCampaign: async () => {
        this.log.push({ call: 'completeCampaign', at: scheduledAt() });
        return true;
      },
      cancelCampaignDelivery: async () => {
        this.log.push({ call: 'cancelCampaignDelivery', at: scheduledAt() });
        return this.queued.size;
      },
    };
  }

  chunkActivities(): MockActivities {
    return {
      deliverCampaignChunk: async ({ chunk }) => {
        const now = scheduledAt();
        this.log.push({ call: 'deliverCampaignChunk', at: now, chunk, queue: Context.current().info.taskQueue });
        this.maxInFlight = Math.max(this.maxInFlight, ++this.inFlight);
        try {
          // Long enough for the workflow to start every chunk it may start alongside this one.
          await (this.hold ?? new Promise((r) => setTimeout(r, 20)));
          if (this.stopped) return { stopped: true, claimed: 0, sent: 0, retried: 0, failed: 0 };
          let sent = 0;
          let retried = 0;
          for (const [id, due] of [...this.queued].sort(([a], [b]) => a.localeCompare(b))) {
            if (id <= (chunk.after ?? '') || id > chunk.upTo || due > now) continue;
            const backoff = this.refuseOnce.get(id);
            if (backoff !== undefined) {
              this.refuseOnce.delete(id);
              this.queued.set(id, now + backoff * 1000);
              retried++;
            } else {
              this.queued.delete(id);
              this.sent.push({ id, at: now });
              sent++;
            }
          }
          return { stopped: false, claimed: sent + retried, sent, retried, failed: 0 };
        } finally {
          this.inFlight--;
        }
      },
    };
  }

  /** Runs `fn` with a worker for the workflow and its activities, and one on the campaign-chunk queue. */
  run<T>(fn: (start: (scheduledFor: string | null) => Promise<CampaignHandle>, taskQueue: string) => Promise<T>): Promise<T> {
    return withWorkers(
      t.env,
      this.activities(),
      (taskQueue) => {
        const args: (scheduledFor: string | null) => [CampaignSendInput] = (scheduledFor) => [{ campaignId: this.campaignId, scheduledFor }];
        const start = (scheduledFor: string | null) =>
          t.env.client.workflow.start(campaignSendWorkflow, { taskQueue, workflowId: workflowIds.campaignSend(this.campaignId), args: args(scheduledFor) });
        return fn(start, taskQueue);
      },
      (taskQueue) => [{ taskQueue: campaignChunkQueue(taskQueue), activities: this.chunkActivities() }],
    );
  }
}

type CampaignHandle = WorkflowHandleWithFirstExecutionRunId<typeof campaignSendWorkflow>;

const iso = (ms: number) => new Date(ms).toISOString();
const deliveries = (events: HistoryEvent[]) => events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverCampaignChunk');

describe('scheduling', () => {
  test('a scheduled campaign sleeps durably until its time (3 days, skipped), then fixes its audience, delivers it and completes', async () => {
    const c = new FakeCampaign(3, 20, 4);
    const at = (await t.env.currentTimeMs()) + 3 * DAY;
    const wallStart = Date.now();
    await c.run(async (start) => (await start(iso(at))).result());
    expect(Date.now() - wallStart).toBeLessThan(15_000);
    expect(c.calls('startCampaignSend')).toHaveLength(1);
    expect(c.calls('startCampaignSend')[0].at).toBeGreaterThanOrEqual(at);
    expect(c.sent.map((s) => s.id)).toEqual([FakeCampaign.id(0), FakeCampaign.id(1), FakeCampaign.id(2)]);
    expect(c.log.at(-1)?.call).toBe('completeCampaign');
    expect(c.calls('completeCampaign')).toHaveLength(1);
  });

  test('the reschedule update moves the time and answers it: nothing starts at the old time, the new one starts it', async () => {
    const c = new FakeCampaign(1, 20, 4);
    const now = await t.env.currentTimeMs();
    const later = iso(now + 5 * DAY);
    await c.run(async (start) => {
      const handle = await start(iso(now + 3 * DAY));
      expect(await handle.executeUpdate(rescheduleUpdate, { args: [later] })).toEqual({ scheduledFor: later });
      await t.env.sleep(4 * DAY);
      expect(c.calls('startCampaignSend')).toEqual([]);
      await handle.result();
    });
    expect(c.calls('startCampaignSend')[0].at).toBeGreaterThanOrEqual(Date.parse(later));
    expect(c.calls('completeCampaign')).toHaveLength(1);
  });

  test('the reschedule update refuses what is not a date, and null sends at once', async () => {
    const c = new FakeCampaign(1, 20, 4);
    const now = await t.env.currentTimeMs();
    await c.run(async (start) => {
      const handle = await start(iso(now + 30 * DAY));
      const refused = await handle.executeUpdate(rescheduleUpdate, { args: ['next tuesday-ish'] }).catch((err) => err);
      expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
      expect(refused.cause.message).toBe('"next tuesday-ish" is not a date');
      expect(await handle.executeUpdate(rescheduleUpdate, { args: [null] })).toEqual({ scheduledFor: null });
      await handle.result();
    });
    expect(c.calls('startCampaignSend')[0].at - now).toBeLessThan(HOUR);
  });

  test('once sending has begun the reschedule update is refused, and changes nothing', async () => {
    const c = new FakeCampaign(1, 20, 4);
    const starting = gate();
    c.holdStart = starting.promise;
    await c.run(async (start) => {
      const handle = await start(null);
      try {
        // Sending begins; the move arrives while the audience is being fixed.
        await eventually(() => c.calls('startCampaignSend').length === 1, 'sending to begin');
        const refused = await handle.executeUpdate(rescheduleUpdate, { args: [iso((await t.env.currentTimeMs()) + DAY)] }).catch((err) => err);
        expect(refused).toBeInstanceOf(WorkflowUpdateFailedError);
        expect(refused.cause.message).toBe('the campaign is already being sent');
      } finally {
        starting.open();
      }
      await handle.result();
      const events = (await handle.fetchHistory()).events ?? [];
      expect(events.some((e) => e.workflowExecutionUpdateAcceptedEventAttributes)).toBe(false);
    });
    expect(c.calls('startCampaignSend')).toHaveLength(1);
    expect(c.sent).toHaveLength(1);
    expect(c.calls('completeCampaign')).toHaveLength(1);
  });

  test('startCampaignSend answering not to proceed (cancelled meanwhile, over the limit) ends it with nothing planned', async () => {
    const c = new FakeCampaign(5, 20, 4);
    c.proceed = false;
    await c.run(async (start) => (await start(null)).result());
    expect(c.log.map((l) => l.call)).toEqual(['startCampaignSend']);
  });
});

describe('delivery', () => {
  test('chunks are planned by contact id and delivered on the chunk queue, at most `parallelism` in flight, then it completes', async () => {
    const c = new FakeCampaign(230, 10, 4);
    let taskQueue = '';
    await c.run(async (start, tq) => {
      taskQueue = tq;
      await (await start(null)).result();
    });
    const chunks = c.calls('deliverCampaignChunk');
    expect(chunks).toHaveLength(23);
    expect(new Set(chunks.map((d) => d.queue))).toEqual(new Set([campaignChunkQueue(taskQueue)]));
    // One after the other by contact id, none overlapping, none skipped (workers may start them in any order).
    const planned = chunks.map((d) => d.chunk!).sort((a, b) => a.upTo.localeCompare(b.upTo));
    expect(planned.map((k) => k.after)).toEqual([null, ...planned.slice(0, -1).map((k) => k.upTo)]);
    expect(c.sent.map((s) => s.id).sort()).toEqual(Array.from({ length: 230 }, (_, i) => FakeCampaign.id(i)));
    expect(c.maxInFlight).toBe(4);
    expect(c.log.at(-1)?.call).toBe('completeCampaign');
    expect(c.calls('completeCampaign')).toHaveLength(1);
  });

  test(`continues as new after ${CHUNKS_PER_RUN} chunks, from where it got to, without fixing the audience again`, async () => {
    const c = new FakeCampaign(1100, 10, 25);
    const handle = await c.run(async (start) => {
      const h = await start(null);
      await h.result();
      return h;
    });
    const runs = await runsOf(handle);
    expect(runs.map((r) => deliveries(r.events).length)).toEqual([CHUNKS_PER_RUN, 10]);
    const continued = runs[0].events.at(-1)!.workflowExecutionContinuedAsNewEventAttributes!;
    const input = JSON.parse(Buffer.from(continued.input!.payloads![0].data!).toString());
    // The first run's chunks run in parallel, so they may finish (and be recorded) out of order: the run
    // continues from the last one it planned, the highest contact id among them.
    const firstRun = c
      .calls('deliverCampaignChunk')
      .slice(0, CHUNKS_PER_RUN)
      .map((call) => call.chunk!.upTo);
    const lastPlanned = [...firstRun].sort().at(-1);
    expect(input).toEqual({ campaignId: c.campaignId, scheduledFor: null, resumed: true, after: lastPlanned });
    expect(c.calls('startCampaignSend')).toHaveLength(1);
    expect(c.sent).toHaveLength(1100);
    expect(new Set(c.sent.map((s) => s.id)).size).toBe(1100);
    expect(c.calls('completeCampaign')).toHaveLength(1);
  });

  test('a second pass, once what a 4xx sent back comes due (skipped time), re-plans it from the first recipient', async () => {
    const refused = FakeCampaign.id(15);
    const c = new FakeCampaign(30, 10, 2, new Map([[refused, 120]]));
    await c.run(async (start) => (await start(null)).result());
    expect(c.sent.map((s) => s.id).sort()).toEqual(Array.from({ length: 30 }, (_, i) => FakeCampaign.id(i)));
    const chunks = c.calls('deliverCampaignChunk');
    expect(chunks).toHaveLength(4);
    // The first pass delivered three chunks and was sent back one recipient: due again 120 s later.
    const firstTry = chunks.find((d) => d.chunk!.after !== null && d.chunk!.after < refused && d.chunk!.upTo >= refused)!;
    const secondPass = chunks[3];
    expect(secondPass.chunk).toEqual({ after: null, upTo: refused });
    expect(secondPass.at - firstTry.at).toBeGreaterThanOrEqual(120_000);
    expect(c.sent.find((s) => s.id === refused)!.at).toBe(secondPass.at);
    expect(c.log.at(-1)?.call).toBe('completeCampaign');
  });

  test('a chunk that finds the campaign no longer sending stops it: nothing more is started, and it is not completed', async () => {
    const c = new FakeCampaign(100, 10, 2);
    c.stopped = true;
    await c.run(async (start) => (await start(null)).result());
    expect(c.calls('deliverCampaignChunk')).toHaveLength(2);
    expect(c.calls('completeCampaign')).toEqual([]);
  });
});

describe('cancellation', () => {
  test('a scheduled campaign cancelled while it waits sends nothing, and its delivery is cancelled', async () => {
    const c = new FakeCampaign(5, 20, 4);
    const failed = await c.run(async (start) => {
      const handle = await start(iso((await t.env.currentTimeMs()) + 3 * DAY));
      await eventually(async () => ((await handle.fetchHistory()).events ?? []).some((e) => e.timerStartedEventAttributes), 'the wait');
      await handle.cancel();
      return await handle.result().catch((err) => err);
    });
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect(failed.cause).toBeInstanceOf(CancelledFailure);
    expect(c.log.map((l) => l.call)).toEqual(['cancelCampaignDelivery']);
  });

  test('a sending campaign cancelled stops: no chunk started after, no completion, its delivery cancelled', async () => {
    const c = new FakeCampaign(100, 10, 3);
    const held = gate();
    c.hold = held.promise;
    const failed = await c.run(async (start) => {
      const handle = await start(null);
      try {
        await eventually(() => c.inFlight === 3, 'three chunks in flight');
        await handle.cancel();
        return await handle.result().catch((err) => err);
      } finally {
        held.open();
      }
    });
    expect(failed).toBeInstanceOf(WorkflowFailedError);
    expect(failed.cause).toBeInstanceOf(CancelledFailure);
    expect(c.calls('deliverCampaignChunk')).toHaveLength(3);
    expect(c.calls('completeCampaign')).toEqual([]);
    expect(c.calls('cancelCampaignDelivery')).toHaveLength(1);
  });
});

describe('A/B tests and local time', () => {
  /** A campaign whose recipients from `sample` on are held for the winner. */
  const abCampaign = (recipients: number, sample: number, ab: { waitMinutes: number; manual: boolean }) => {
    const c = new FakeCampaign(recipients, 10, 2);
    const held = [...c.queued.keys()].slice(sample);
    for (const id of held) c.queued.delete(id);
    c.ab = { ...ab, held };
    return c;
  };

  test('the sample goes first, the wait (a week, skipped) is a durable timer, then the winner goes to the rest', async () => {
    const c = abCampaign(50, 10, { waitMinutes: 10080, manual: false });
    const handle = await c.run(async (start) => {
      const h = await start(null);
      await h.result();
      return h;
    });
    const held = c.calls('holdAbTest')[0].at;
    expect(c.sent.filter((s) => s.at <= held).map((s) => s.id)).toEqual(Array.from({ length: 10 }, (_, i) => FakeCampaign.id(i)));
    const decided = c.calls('decideAbWinner');
    expect(decided).toHaveLength(1);
    expect(decided[0].at - held).toBeGreaterThanOrEqual(10080 * 60_000);
    expect(c.sent.filter((s) => s.at >= decided[0].at)).toHaveLength(40);
    expect(new Set(c.sent.map((s) => s.id)).size).toBe(50);
    expect(c.calls('completeCampaign')).toHaveLength(1);
    const [run] = await runsOf(handle);
    expect(run.events.filter((e) => e.timerStartedEventAttributes)).toHaveLength(1);
  });

  test('manual: no winner when the wait ends; the winner signal goes on; a cancel during the wait sends nothing more', async () => {
    const c = abCampaign(30, 6, { waitMinutes: 60, manual: true });
    await c.run(async (start) => {
      const h = await start(null);
      await eventually(() => c.calls('holdAbTest').length === 1, 'the sample to be sent');
      await t.env.sleep(DAY);
      expect(c.calls('decideAbWinner')).toHaveLength(1);
      expect(c.sent).toHaveLength(6);
      c.ab!.chosen = true;
      await h.signal(abWinnerChosenSignal);
      await h.result();
    });
    expect(c.calls('decideAbWinner')).toHaveLength(2);
    expect(c.sent).toHaveLength(30);

    const cancelled = abCampaign(30, 6, { waitMinutes: 60, manual: false });
    const failed = await cancelled.run(async (start) => {
      const h = await start(null);
      await eventually(() => cancelled.calls('holdAbTest').length === 1, 'the wait');
      await h.cancel();
      return h.result().catch((err) => err);
    });
    expect(failed.cause).toBeInstanceOf(CancelledFailure);
    expect(cancelled.calls('decideAbWinner')).toEqual([]);
    expect(cancelled.sent).toHaveLength(6);
    expect(cancelled.calls('cancelCampaignDelivery')).toHaveLength(1);
  });

  test('400 time zones: each zone goes at its moment, one timer per moment, and each run of the history stays bounded', async () => {
    const ZONES = 400;
    const c = new FakeCampaign(ZONES * 2, 50, 4);
    const start0 = await t.env.currentTimeMs();
    // Two recipients per zone; zone z's moment is z quarter-hours away.
    const dueOf = new Map([...c.queued.keys()].map((id, i) => [id, start0 + Math.floor(i / 2) * 15 * 60_000]));
    for (const [id, due] of dueOf) c.queued.set(id, due);
    const handle = await c.run(async (start) => {
      const h = await start(null);
      await h.result();
      return h;
    });
    expect(c.sent).toHaveLength(ZONES * 2);
    for (const s of c.sent) expect(s.at).toBeGreaterThanOrEqual(dueOf.get(s.id)!);
    expect(c.calls('completeCampaign')).toHaveLength(1);
    // Closed runs are evicted from the test server's memory: each run is told apart by its activities' run id.
    const runs = Map.groupBy(c.calls('planCampaignChunks'), (l) => l.run);
    expect(runs.size).toBeGreaterThan(ZONES / 25);
    for (const [, plans] of runs) expect(plans.length).toBeLessThan(100);
    const last = (await handle.client.getHandle(handle.workflowId).fetchHistory()).events ?? [];
    expect(last.length).toBeLessThan(1000);
    expect(last.filter((e) => e.timerStartedEventAttributes).length).toBeLessThanOrEqual(25);
  }, 180_000);
});
