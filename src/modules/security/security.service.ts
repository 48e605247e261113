import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { notFound } from '../../http/errors';
import { countsBetween, DAY_MS, sumByName } from '../activity/activity-counts';

export interface SecurityThresholds {
  windowDays: number;
  minSent: number;
  bounceRate: number;
  complaintRate: number;
}

const ratio = (n: number, of: number) => (of > 0 ? n / of : 0);
const percent = (r: number) => `${(r * 100).toFixed(2).replace(/\.?0+$/, '')}%`;

/**
 * Mail sent, permanent bounces and complaints in the window: the last `windowDays` days, or since the
 * last review when that is later (a lifted suspension starts a clean slate). Transient bounces are
 * not held against the sender.
 */
export async function sendingHealth(em: EntityManager, projectId: string, t: SecurityThresholds, now = new Date()) {
  const [project] = await sql<{ security_reviewed_at: Date | null }>(em, `SELECT security_reviewed_at FROM projects WHERE id = ?`, [projectId]);
  if (!project) throw notFound('Project');
  const windowStart = new Date(now.getTime() - t.windowDays * DAY_MS);
  const reviewed = project.security_reviewed_at ? new Date(project.security_reviewed_at) : undefined;
  const since = reviewed && reviewed > windowStart ? reviewed : windowStart;
  const counts = sumByName(await countsBetween(em, projectId, 'event', since, now, ['email.sent', 'email.bounce', 'email.complaint']), true);
  const sent = counts.get('email.sent') ?? 0;
  const bounced = counts.get('email.bounce:permanent') ?? 0;
  const complained = counts.get('email.complaint') ?? 0;
  return { since, sent, bounced, complained, bounceRate: ratio(bounced, sent), complaintRate: ratio(complained, sent) };
}

/**
 * Suspends the project when a rate passes its threshold (with at least `minSent` emails sent in the
 * window): it is disabled, so its API keys get 403 PROJECT_DISABLED, and the suspension is recorded.
 * Called after every bounce and complaint; a project already disabled is left as it is.
 */
export async function enforceSendingHealth(em: EntityManager, projectId: string, t: SecurityThresholds): Promise<boolean> {
  const h = await sendingHealth(em, projectId, t);
  if (h.sent < t.minSent) return false;
  const breach =
    h.bounceRate > t.bounceRate
      ? { metric: 'bounce', rate: h.bounceRate, threshold: t.bounceRate }
      : h.complaintRate > t.complaintRate
        ? { metric: 'complaint', rate: h.complaintRate, threshold: t.complaintRate }
        : undefined;
  if (!breach) return false;
  const reason = `Suspended: ${breach.metric} rate ${percent(breach.rate)} of ${h.sent} emails sent since ${h.since.toISOString()} is above ${percent(breach.threshold)}`;
  return em.transactional(async (tx) => {
    const [disabled] = await sql(tx, `UPDATE projects SET disabled = true, disabled_reason = ?, updated_at = now() WHERE id = ? AND NOT disabled RETURNING id`, [
      reason,
      projectId,
    ]);
    if (!disabled) return false;
    await sql(
      tx,
      `INSERT INTO project_suspensions (id, project_id, metric, rate, threshold, sent, bounced, complained, window_start, reason)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [newId(), projectId, breach.metric, breach.rate, breach.threshold, h.sent, h.bounced, h.complained, h.since, reason],
    );
    return true;
  });
}

/** Rates, thresholds, whether the project is suspended, and its recent suspensions. */
export async function securityState(em: EntityManager, projectId: string, t: SecurityThresholds) {
  const h = await sendingHealth(em, projectId, t);
  const [project] = await sql<{ disabled: boolean; disabled_reason: string | null }>(em, `SELECT disabled, disabled_reason FROM projects WHERE id = ?`, [projectId]);
  const suspensions = await sql<{
    id: string;
    metric: string;
    rate: number;
    threshold: number;
    sent: string;
    bounced: string;
    complained: string;
    window_start: Date;
    reason: string;
    created_at: Date;
    lifted_at: Date | null;
    lifted_by: string | null;
  }>(em, `SELECT * FROM project_suspensions WHERE project_id = ? ORDER BY created_at DESC LIMIT 20`, [projectId]);
  const judged = h.sent >= t.minSent;
  const atRisk = judged && (h.bounceRate >= t.bounceRate / 2 || h.complaintRate >= t.complaintRate / 2);
  const suspended = suspensions.some((s) => !s.lifted_at) && project.disabled;
  return {
    projectId,
    status: suspended ? 'suspended' : atRisk ? 'at_risk' : 'ok',
    disabled: project.disabled,
    disabledReason: project.disabled_reason,
    window: { since: h.since.toISOString(), days: t.windowDays },
    sent: h.sent,
    bounced: h.bounced,
    complained: h.complained,
    bounceRate: Math.round(h.bounceRate * 10_000) / 10_000,
    complaintRate: Math.round(h.complaintRate * 10_000) / 10_000,
    thresholds: { bounceRate: t.bounceRate, complaintRate: t.complaintRate, minSent: t.minSent },
    suspensions: suspensions.map((s) => ({
      id: s.id,
      metric: s.metric,
      rate: s.rate,
      threshold: s.threshold,
      sent: Number(s.sent),
      bounced: Number(s.bounced),
      complained: Number(s.complained),
      windowStart: new Date(s.window_start).toISOString(),
      reason: s.reason,
      createdAt: new Date(s.created_at).toISOString(),
      liftedAt: s.lifted_at ? new Date(s.lifted_at).toISOString() : null,
      liftedBy: s.lifted_by,
    })),
  };
}

/** Lifts the project's suspensions (an operator's decision): enabled again, rates judged afresh from now. */
export async function reinstateProject(em: EntityManager, projectId: string, by: string): Promise<{ lifted: number }> {
  return em.transactional(async (tx) => {
    const [project] = await sql(tx, `UPDATE projects SET disabled = false, disabled_reason = null, security_reviewed_at = now(), updated_at = now() WHERE id = ? RETURNING id`, [
      projectId,
    ]);
    if (!project) throw notFound('Project');
    const lifted = await sql(tx, `UPDATE project_suspensions SET lifted_at = now(), lifted_by = ? WHERE project_id = ? AND lifted_at IS NULL RETURNING id`, [
      by,
      projectId,
    ]);
    return { lifted: lifted.length };
  });
}
