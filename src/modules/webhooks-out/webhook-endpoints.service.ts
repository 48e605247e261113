import crypto from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { sql } from '../../db/orm';
import { notFound, simpleBadRequest } from '../../http/errors';
import type { deliveryStatus } from './webhook-endpoints.schemas';

/** The old secret keeps signing beside the new one this long after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 3600_000;

export interface EndpointRow {
  id: string;
  project_id: string;
  url: string;
  events: string[] | null;
  description: string | null;
  enabled: boolean;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  failing_since: Date | null;
  disabled_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface DeliveryRow {
  id: string;
  endpoint_id: string;
  project_id: string;
  event_type: string;
  body: string;
  status: (typeof deliveryStatus)[number];
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: Date;
  created_at: Date;
  delivered_at: Date | null;
}

/** `whsec_` and base64 of 32 random bytes, as Standard Webhooks libraries expect. */
export function newSecret(): string {
  return `whsec_${crypto.randomBytes(32).toString('base64')}`;
}

/**
 * The `webhook-signature` header: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` per secret, space
 * separated (several while a rotated-out secret still signs).
 */
export function signatureHeader(secrets: string[], id: string, timestamp: number, body: string): string {
  return secrets
    .map(
      (s) =>
        `v1,${crypto
          .createHmac('sha256', Buffer.from(s.replace(/^whsec_/, ''), 'base64'))
          .update(`${id}.${timestamp}.${body}`)
          .digest('base64')}`,
    )
    .join(' ');
}

/** The secrets that sign now: the current one, and the previous one for a day after a rotation. */
export function signingSecrets(e: Pick<EndpointRow, 'secret' | 'previous_secret' | 'previous_secret_expires_at'>, now = new Date()): string[] {
  return e.previous_secret && e.previous_secret_expires_at && new Date(e.previous_secret_expires_at) > now ? [e.secret, e.previous_secret] : [e.secret];
}

/** Timestamps come back from `sql` as strings; every one is answered in ISO 8601. */
const iso = (d: Date | string) => new Date(d).toISOString();

export function toEndpointDto(e: EndpointRow, opts: { secret?: boolean } = {}) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    description: e.description,
    enabled: e.enabled,
    disabledReason: e.disabled_reason,
    ...(opts.secret ? { secret: e.secret } : {}),
    createdAt: iso(e.created_at),
    updatedAt: iso(e.updated_at),
  };
}

export function toDeliveryDto(d: DeliveryRow) {
  return {
    id: d.id,
    eventType: d.event_type,
    status: d.status,
    attempts: d.attempts,
    lastStatusCode: d.last_status_code,
    lastError: d.last_error,
    nextAttemptAt: d.status === 'PENDING' ? iso(d.next_attempt_at) : null,
    createdAt: iso(d.created_at),
    deliveredAt: d.delivered_at ? iso(d.delivered_at) : null,
  };
}

interface EndpointInput {
  url?: string;
  events?: string[] | null;
  description?: string | null;
  enabled?: boolean;
}

export async function createEndpoint(em: EntityManager, projectId: string, input: EndpointInput & { url: string }): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow>(
    em,
    `INSERT INTO webhook_endpoints (id, project_id, url, events, description, enabled, secret) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`,
    [newId(), projectId, input.url, input.events ?? null, input.description ?? null, input.enabled ?? true, newSecret()],
  );
  return row;
}

export async function listEndpoints(em: EntityManager, projectId: string): Promise<EndpointRow[]> {
  return sql<EndpointRow>(em, `SELECT * FROM webhook_endpoints WHERE project_id = ? ORDER BY created_at, id`, [projectId]);
}

export async function getEndpoint(em: EntityManager, projectId: string, id: string): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow>(em, `SELECT * FROM webhook_endpoints WHERE id = ? AND project_id = ?`, [id, projectId]);
  if (!row) throw notFound('Webhook endpoint');
  return row;
}

/** Changes what is given; enabling again clears why it was disabled and its failure streak. */
export async function updateEndpoint(em: EntityManager, projectId: string, id: string, input: EndpointInput): Promise<EndpointRow> {
  const current = await getEndpoint(em, projectId, id);
  const enabled = input.enabled ?? current.enabled;
  const reenabled = enabled && !current.enabled;
  const [row] = await sql<EndpointRow>(
    em,
    `UPDATE webhook_endpoints SET url = ?, events = ?, description = ?, enabled = ?,
       disabled_reason = CASE WHEN ? THEN NULL ELSE disabled_reason END,
       failing_since = CASE WHEN ? THEN NULL ELSE failing_since END, updated_at = now()
     WHERE id = ? AND project_id = ? RETURNING *`,
    [
      input.url ?? current.url,
      input.events === undefined ? current.events : input.events,
      input.description === undefined ? current.description : input.description,
      enabled,
      reenabled,
      reenabled,
      id,
      projectId,
    ],
  );
  return row;
}

export async function deleteEndpoint(em: EntityManager, projectId: string, id: string): Promise<void> {
  const rows = await sql(em, `DELETE FROM webhook_endpoints WHERE id = ? AND project_id = ? RETURNING id`, [id, projectId]);
  if (!rows.length) throw notFound('Webhook endpoint');
}

/** A new secret; the old one keeps signing for ROTATION_OVERLAP_MS. */
export async function rotateSecret(em: EntityManager, projectId: string, id: string): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow>(
    em,
    `UPDATE webhook_endpoints SET previous_secret = secret, previous_secret_expires_at = now() + make_interval(secs => ?),
       secret = ?, updated_at = now() WHERE id = ? AND project_id = ? RETURNING *`,
    [ROTATION_OVERLAP_MS / 1000, newSecret(), id, projectId],
  );
  if (!row) throw notFound('Webhook endpoint');
  return row;
}

/** Queues a `webhook.test` message to the endpoint (enabled or not: the user asked for it). */
export async function queueTestDelivery(em: EntityManager, endpoint: EndpointRow): Promise<DeliveryRow> {
  const body = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { endpointId: endpoint.id } });
  const [row] = await sql<DeliveryRow>(
    em,
    `INSERT INTO webhook_deliveries (id, endpoint_id, project_id, event_type, body) VALUES (?, ?, ?, 'webhook.test', ?) RETURNING *`,
    [newId(), endpoint.id, endpoint.project_id, body],
  );
  await notifyWebhookDispatchers(em);
  return row;
}

export const WEBHOOK_DELIVERIES_CHANNEL = 'postbox_webhook_deliveries';
export const notifyWebhookDispatchers = (em: EntityManager) => sql(em, `SELECT pg_notify(?, '')`, [WEBHOOK_DELIVERIES_CHANNEL]);

/** Sends a delivery again now, from a fresh series of attempts (a FAILED one, or a PENDING one waiting for its next). */
export async function retryDelivery(em: EntityManager, projectId: string, endpointId: string, deliveryId: string): Promise<DeliveryRow> {
  await getEndpoint(em, projectId, endpointId);
  const [row] = await sql<DeliveryRow>(
    em,
    `UPDATE webhook_deliveries SET status = 'PENDING', attempts = 0, next_attempt_at = now(), claimed_until = NULL
     WHERE id = ? AND endpoint_id = ? AND status <> 'SUCCEEDED' RETURNING *`,
    [deliveryId, endpointId],
  );
  if (!row) {
    const [exists] = await sql(em, `SELECT 1 FROM webhook_deliveries WHERE id = ? AND endpoint_id = ?`, [deliveryId, endpointId]);
    if (!exists) throw notFound('Delivery');
    throw simpleBadRequest('The delivery already succeeded');
  }
  await notifyWebhookDispatchers(em);
  return row;
}

/** Finished deliveries are kept in the log this long. */
const DELIVERY_LOG_DAYS = 30;

/** Drops finished deliveries older than DELIVERY_LOG_DAYS (the maintenance schedule's purge). */
export async function purgeWebhookDeliveries(em: EntityManager): Promise<number> {
  const rows = await sql(em, `DELETE FROM webhook_deliveries WHERE status <> 'PENDING' AND created_at < now() - make_interval(days => ?) RETURNING 1`, [
    DELIVERY_LOG_DAYS,
  ]);
  return rows.length;
}

/** An endpoint's deliveries, newest first, by cursor (the id of the previous page's last one). */
export async function listDeliveries(
  em: EntityManager,
  projectId: string,
  endpointId: string,
  q: { limit: number; cursor?: string; status?: (typeof deliveryStatus)[number] },
): Promise<{ data: ReturnType<typeof toDeliveryDto>[]; cursor: string; hasMore: boolean; total: number }> {
  await getEndpoint(em, projectId, endpointId);
  const where = ['endpoint_id = ?'];
  const params: unknown[] = [endpointId];
  if (q.status) {
    where.push('status = ?');
    params.push(q.status);
  }
  const filter = [...params];
  if (q.cursor) {
    const [anchor] = await sql<{ created_at: Date }>(em, `SELECT created_at FROM webhook_deliveries WHERE id = ? AND endpoint_id = ?`, [q.cursor, endpointId]);
    if (!anchor) throw simpleBadRequest('Invalid cursor');
    where.push('(created_at, id) < (?, ?)');
    params.push(anchor.created_at, q.cursor);
  }
  const rows = await sql<DeliveryRow>(em, `SELECT * FROM webhook_deliveries WHERE ${where.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ?`, [
    ...params,
    q.limit + 1,
  ]);
  const page = rows.slice(0, q.limit);
  const total = q.cursor
    ? 0
    : Number(
        (await sql<{ n: string }>(em, `SELECT count(*) AS n FROM webhook_deliveries WHERE ${where.slice(0, q.status ? 2 : 1).join(' AND ')}`, filter))[0].n,
      );
  return { data: page.map(toDeliveryDto), cursor: page.length ? page[page.length - 1].id : '', hasMore: rows.length > q.limit, total };
}
