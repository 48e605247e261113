import type { EntityDictionary, EntityManager } from '@mikro-orm/postgresql';
import { sql } from '../../db/orm';
import { WebhookEndpoint } from './webhook-endpoints.entity';

export const WEBHOOK_DELIVERIES_CHANNEL = 'postbox_webhook_deliveries';

/** Wakes the dispatchers listening on WEBHOOK_DELIVERIES_CHANNEL. SQL: pg_notify has no EntityManager counterpart. */
export async function notifyWebhookDispatchers(em: EntityManager): Promise<void> {
  await sql(em, `SELECT pg_notify(?, '')`, [WEBHOOK_DELIVERIES_CHANNEL]);
}

/** A delivery as a dispatcher claims it: what one attempt needs. */
export interface ClaimedDelivery {
  id: string;
  endpointId: string;
  attempts: number;
  body: string;
}

/** Seconds until the next delivery a dispatcher could send falls due (null: none). SQL: an aggregate over the queue, on PostgreSQL's clock. */
export async function nextDeliveryDueInSeconds(em: EntityManager): Promise<number | null> {
  const [next] = await sql<{ due: number | null }>(
    em,
    `SELECT extract(epoch FROM min(greatest(d.next_attempt_at, coalesce(d.claimed_until, d.next_attempt_at))) - now())::float AS due
     FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
     WHERE d.status = 'PENDING' AND (w.enabled OR d.event_type = 'webhook.test')`,
  );
  return next.due;
}

/**
 * Claims due deliveries for `seconds`: at most `perEndpoint` of each endpoint, `total` in all, of one
 * endpoint (`only`) or of any but `exclude`. SQL: one statement with SKIP LOCKED, so that concurrent
 * dispatchers never claim the same delivery.
 */
export function claimDeliveries(
  em: EntityManager,
  which: { only?: string; exclude?: string[] },
  limits: { perEndpoint: number; total: number; seconds: number },
): Promise<ClaimedDelivery[]> {
  return sql<ClaimedDelivery>(
    em,
    // Endpoint by endpoint through (endpoint_id, next_attempt_at): a dead endpoint's backlog is never scanned.
    // Locking re-checks the row, so a delivery another dispatcher claimed meanwhile is left alone.
    `WITH due AS (
       SELECT d.id FROM webhook_endpoints w
       CROSS JOIN LATERAL (
         SELECT d.id FROM webhook_deliveries d
         WHERE d.endpoint_id = w.id AND d.status = 'PENDING' AND d.next_attempt_at <= now()
           AND (d.claimed_until IS NULL OR d.claimed_until < now()) AND (w.enabled OR d.event_type = 'webhook.test')
         ORDER BY d.next_attempt_at LIMIT ?
       ) d
       WHERE (?::uuid IS NULL OR w.id = ?::uuid) AND w.id <> ALL (?::uuid[])
       LIMIT ?
     ), locked AS (
       SELECT id FROM webhook_deliveries
       WHERE id IN (SELECT id FROM due) AND status = 'PENDING' AND (claimed_until IS NULL OR claimed_until < now())
       FOR UPDATE SKIP LOCKED
     )
     UPDATE webhook_deliveries d SET claimed_until = now() + make_interval(secs => ?) FROM locked WHERE d.id = locked.id
     RETURNING d.id, d.endpoint_id AS "endpointId", d.attempts, d.body`,
    [limits.perEndpoint, which.only ?? null, which.only ?? null, which.exclude ?? [], limits.total, limits.seconds],
  );
}

/** Records a delivered attempt and releases the claim. SQL: one statement per webhook sent, counting the attempt where it is stored. */
export async function recordDelivered(em: EntityManager, deliveryId: string, statusCode: number | undefined): Promise<void> {
  await sql(
    em,
    `UPDATE webhook_deliveries SET status = 'SUCCEEDED', attempts = attempts + 1, last_status_code = ?, last_error = NULL,
       delivered_at = now(), claimed_until = NULL WHERE id = ?`,
    [statusCode ?? null, deliveryId],
  );
}

/** Ends an endpoint's failure streak. SQL: recorded beside the attempt, without reading the endpoint again. */
export async function clearEndpointFailing(em: EntityManager, endpointId: string): Promise<void> {
  await sql(em, `UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ?`, [endpointId]);
}

/**
 * Records a failed attempt: FAILED when `final`, else PENDING again in `retryInSeconds`, and releases
 * the claim. SQL: one statement per failed attempt, due on PostgreSQL's clock like the claim that reads it.
 */
export async function recordFailedAttempt(
  em: EntityManager,
  d: { id: string; attempts: number; final: boolean; statusCode: number | null; error: string; retryInSeconds: number },
): Promise<void> {
  await sql(
    em,
    `UPDATE webhook_deliveries SET status = ?, attempts = ?, last_status_code = ?, last_error = ?,
       next_attempt_at = now() + make_interval(secs => ?), claimed_until = NULL WHERE id = ?`,
    [d.final ? 'FAILED' : 'PENDING', d.attempts, d.statusCode, d.error, d.retryInSeconds, d.id],
  );
}

/**
 * Starts or extends an enabled endpoint's failure streak, and disables it on a 410 (`gone`) or once
 * the streak is older than `disableAfterSeconds`. SQL: one conditional UPDATE decides on the row as it
 * is, whichever of the endpoint's concurrent attempts fails last.
 */
export async function markEndpointFailing(em: EntityManager, endpointId: string, gone: boolean, disableAfterSeconds: number): Promise<void> {
  await sql(
    em,
    `UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, now()),
       enabled = CASE WHEN ? OR coalesce(failing_since, now()) < now() - make_interval(secs => ?) THEN false ELSE enabled END,
       disabled_reason = CASE WHEN ? THEN 'The endpoint answered 410 Gone'
         WHEN coalesce(failing_since, now()) < now() - make_interval(secs => ?) THEN 'Every delivery failed for 5 days'
         ELSE disabled_reason END,
       updated_at = now()
     WHERE id = ? AND enabled`,
    [gone, disableAfterSeconds, gone, disableAfterSeconds, endpointId],
  );
}

/**
 * Replaces an endpoint's secret, the old one signing on for `overlapSeconds`; the endpoint as updated,
 * or null when the project has none by that id. SQL: the old secret is moved aside in the same statement, so that of two concurrent rotations
 * the secret the first one answered still signs.
 */
export async function rotateEndpointSecret(
  em: EntityManager,
  projectId: string,
  id: string,
  secret: string,
  overlapSeconds: number,
): Promise<WebhookEndpoint | null> {
  const [row] = await sql<EntityDictionary<WebhookEndpoint>>(
    em,
    `UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_expires_at = now() + make_interval(secs => ?),
       secret = ?, updated_at = now() WHERE id = ? AND project_id = ? RETURNING *`,
    [overlapSeconds, secret, id, projectId],
  );
  return row ? em.map(WebhookEndpoint, row) : null;
}
