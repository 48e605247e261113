import type { Logger } from 'pino';
import { type EntityManager, LockMode } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { transaction } from '../../db/orm';
import { notFound } from '../../errors';
import { Project } from '../accounts';
import { countsBetween, DAY_MS, sumByName } from '../feed';
import { ProjectSuspension } from './security.entity';
import { confirmationBouncesSince, countedComplaintsSince, lateReportsSince } from './security.queries';

export interface SecurityThresholds {
  windowDays: number;
  minSent: number;
  bounceRate: number;
  complaintRate: number;
  /** Complaints must come from this many recipient domains before their rate can suspend. */
  minComplaintDomains: number;
}

const ratio = (n: number, of: number) => (of > 0 ? n / of : 0);
const percent = (r: number) => `${(r * 100).toFixed(2).replace(/\.?0+$/, '')}%`;

/**
 * Mail sent, permanent bounces and complaints in the window: the last `windowDays` days, or since the
 * last review when that is later (a lifted suspension starts a clean slate: then only bounces and
 * complaints of mail sent since count, not late ones of the mail that caused the suspension).
 * Transient bounces are not held against the sender.
 */
export async function sendingHealth(em: EntityManager, projectId: string, t: SecurityThresholds, now = new Date()) {
  const project = await em.findOne(Project, { id: projectId });
  if (!project) throw notFound('Project');
  const windowStart = new Date(now.getTime() - t.windowDays * DAY_MS);
  const reviewedAt = project.securityReviewedAt;
  const sinceReview = reviewedAt !== null && reviewedAt > windowStart;
  const since = sinceReview ? reviewedAt : windowStart;
  const counts = sumByName(await countsBetween(em, projectId, 'event', since, now, ['email.sent', 'email.bounce']), true);
  const sent = counts.get('email.sent') ?? 0;
  let bounced = counts.get('email.bounce:permanent') ?? 0;
  if (sinceReview) {
    // At most one window of events since the review, each matched to its email.
    ({ bounced } = await lateReportsSince(em, projectId, since));
  }
  // Bounces of confirmation mails say nothing of the project's list; a bounce comes days after its mail at most.
  const mailedSince = sinceReview ? since : new Date(since.getTime() - t.windowDays * DAY_MS);
  bounced = Math.max(0, bounced - (await confirmationBouncesSince(em, projectId, since, mailedSince)));
  // Complaints are few: read one by one, so only those that count are counted.
  const { complained, domains } = await countedComplaintsSince(em, projectId, since, sinceReview ? since : null);
  const rates = { bounceRate: ratio(bounced, sent), complaintRate: ratio(complained, sent) };
  return { since, reviewedAt, sent, bounced, complained, complaintDomains: domains, ...rates };
}

/**
 * Suspends the project when a rate passes its threshold (with at least `minSent` emails sent in the
 * window, and for complaints from at least `minComplaintDomains` recipient domains): it is disabled,
 * so its API keys get 403 PROJECT_DISABLED, and the suspension is recorded. Called after every bounce
 * and complaint; a project already disabled is left as it is.
 */
export async function enforceSendingHealth(em: EntityManager, projectId: string, t: SecurityThresholds): Promise<boolean> {
  const h = await sendingHealth(em, projectId, t);
  if (h.sent < t.minSent) return false;
  const breach =
    h.bounceRate > t.bounceRate
      ? { metric: 'bounce' as const, rate: h.bounceRate, threshold: t.bounceRate }
      : h.complaintRate > t.complaintRate && h.complaintDomains >= t.minComplaintDomains
        ? { metric: 'complaint' as const, rate: h.complaintRate, threshold: t.complaintRate }
        : undefined;
  if (!breach) return false;
  const reason =
    `Suspended: ${breach.metric} rate ${percent(breach.rate)} of ${h.sent} emails sent since ${h.since.toISOString()} ` +
    `is above ${percent(breach.threshold)}`;
  return transaction(em, async (tx) => {
    // Not if an operator reinstated the project since these figures were read. The column may hold
    // microseconds (written by SQL's now()) that the date read back lost: the same millisecond is the same review.
    const sameReview = h.reviewedAt === null ? null : { $gte: h.reviewedAt, $lt: new Date(h.reviewedAt.getTime() + 1) };
    const disabled = await tx.nativeUpdate(
      Project,
      { id: projectId, disabled: false, securityReviewedAt: sameReview },
      { disabled: true, disabledReason: reason, updatedAt: new Date() },
    );
    if (!disabled) return false;
    tx.create(ProjectSuspension, {
      id: newId(),
      projectId,
      metric: breach.metric,
      rate: breach.rate,
      threshold: breach.threshold,
      sent: String(h.sent),
      bounced: String(h.bounced),
      complained: String(h.complained),
      windowStart: h.since,
      reason,
    });
    return true;
  });
}

/**
 * Judges a project's rates after its bounces and complaints were committed, from whichever relay
 * reported them, and suspends it when they are over the thresholds. A lone report is judged at once
 * (its caller waits); reports that come while a judgement of their project runs ask for one more, a
 * second after, in the background: a burst of thousands of bounces costs a judgement a second, not one
 * each (each reads the window's counts). Never throws: a failure to judge is logged, the reports stand.
 */
export class SendingJudge {
  private readonly busy = new Map<string, { again: boolean }>();

  constructor(
    private readonly em: () => EntityManager,
    private readonly t: SecurityThresholds,
    private readonly log: Logger,
    private readonly againAfterMs = 1000,
  ) {}

  async judge(projectId: string): Promise<void> {
    const running = this.busy.get(projectId);
    if (running) {
      running.again = true;
      return;
    }
    this.busy.set(projectId, { again: false });
    await this.run(projectId);
  }

  private async run(projectId: string): Promise<void> {
    try {
      const suspended = await enforceSendingHealth(this.em(), projectId, this.t);
      if (suspended) this.log.warn({ projectId }, 'project suspended for its bounce or complaint rate');
    } catch (err) {
      this.log.error({ err, projectId }, 'could not judge the sending rates');
    }
    const state = this.busy.get(projectId)!;
    if (!state.again) return void this.busy.delete(projectId);
    state.again = false;
    setTimeout(() => void this.run(projectId), this.againAfterMs).unref();
  }
}

/** Rates, thresholds, whether the project is suspended, and its recent suspensions. */
export async function securityState(em: EntityManager, projectId: string, t: SecurityThresholds) {
  const h = await sendingHealth(em, projectId, t);
  // sendingHealth found the project: here it comes from the identity map.
  const project = (await em.findOne(Project, { id: projectId }))!;
  const suspensions = await em.find(ProjectSuspension, { projectId }, { orderBy: { createdAt: 'desc' }, limit: 20 });
  const judged = h.sent >= t.minSent;
  const atRisk = judged && (h.bounceRate >= t.bounceRate / 2 || h.complaintRate >= t.complaintRate / 2);
  const suspended = suspensions.some((s) => !s.liftedAt) && project.disabled;
  return {
    projectId,
    status: suspended ? 'suspended' : atRisk ? 'at_risk' : 'ok',
    disabled: project.disabled,
    disabledReason: project.disabledReason,
    window: { since: h.since.toISOString(), days: t.windowDays },
    sent: h.sent,
    bounced: h.bounced,
    complained: h.complained,
    complaintDomains: h.complaintDomains,
    bounceRate: Math.round(h.bounceRate * 10_000) / 10_000,
    complaintRate: Math.round(h.complaintRate * 10_000) / 10_000,
    thresholds: { bounceRate: t.bounceRate, complaintRate: t.complaintRate, minSent: t.minSent, minComplaintDomains: t.minComplaintDomains },
    suspensions: suspensions.map((s) => ({
      id: s.id,
      metric: s.metric,
      rate: s.rate,
      threshold: s.threshold,
      sent: Number(s.sent),
      bounced: Number(s.bounced),
      complained: Number(s.complained),
      windowStart: s.windowStart.toISOString(),
      reason: s.reason,
      createdAt: s.createdAt.toISOString(),
      liftedAt: s.liftedAt?.toISOString() ?? null,
      liftedBy: s.liftedBy,
    })),
  };
}

/**
 * Lifts the project's suspensions (an operator's decision): enabled again, rates judged afresh from
 * now. A project disabled for another reason, with no suspension open, stays as it is.
 */
export async function reinstateProject(em: EntityManager, projectId: string, by: string): Promise<{ lifted: number }> {
  return transaction(em, async (tx) => {
    const [project] = await tx.find(Project, { id: projectId }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
    if (!project) throw notFound('Project');
    const now = new Date();
    const lifted = await tx.nativeUpdate(ProjectSuspension, { projectId, liftedAt: null }, { liftedAt: now, liftedBy: by });
    if (lifted) Object.assign(project, { disabled: false, disabledReason: null, securityReviewedAt: now });
    return { lifted };
  });
}
