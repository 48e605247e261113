import crypto from 'node:crypto';
import { raw, type EntityManager } from '@mikro-orm/postgresql';
import { newId } from '../../db/ids';
import { notFound, simpleBadRequest } from '../../errors';
import { WebhookDelivery } from './webhook-deliveries.entity';
import { WebhookEndpoint } from './webhook-endpoints.entity';
import type { deliveryStatus } from './webhook-endpoints.schemas';
import { notifyWebhookDispatchers, rotateEndpointSecret } from './webhooks-out.queries';

/** The old secret keeps signing beside the new one this long after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 3600_000;

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
export function signingSecrets(e: Pick<WebhookEndpoint, 'secret' | 'previousSecret' | 'previousSecretExpiresAt'>, now = new Date()): string[] {
  return e.previousSecret && e.previousSecretExpiresAt && e.previousSecretExpiresAt > now ? [e.secret, e.previousSecret] : [e.secret];
}

export function toEndpointDto(e: WebhookEndpoint, opts: { secret?: boolean } = {}) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    description: e.description,
    enabled: e.enabled,
    disabledReason: e.disabledReason,
    ...(opts.secret ? { secret: e.secret } : {}),
    createdAt: e.createdAt.toISOString(),
    updatedAt: e.updatedAt.toISOString(),
  };
}

export function toDeliveryDto(d: WebhookDelivery) {
  return {
    id: d.id,
    eventType: d.eventType,
    status: d.status,
    attempts: d.attempts,
    lastStatusCode: d.lastStatusCode,
    lastError: d.lastError,
    nextAttemptAt: d.status === 'PENDING' ? d.nextAttemptAt.toISOString() : null,
    createdAt: d.createdAt.toISOString(),
    deliveredAt: d.deliveredAt ? d.deliveredAt.toISOString() : null,
  };
}

interface EndpointInput {
  url?: string;
  events?: string[] | null;
  description?: string | null;
  enabled?: boolean;
}

export async function createEndpoint(em: EntityManager, projectId: string, input: EndpointInput & { url: string }): Promise<WebhookEndpoint> {
  const endpoint = em.create(WebhookEndpoint, {
    id: newId(),
    projectId,
    url: input.url,
    events: input.events ?? null,
    description: input.description ?? null,
    enabled: input.enabled ?? true,
    secret: newSecret(),
  });
  await em.persist(endpoint).flush();
  return endpoint;
}

export function listEndpoints(em: EntityManager, projectId: string): Promise<WebhookEndpoint[]> {
  return em.find(WebhookEndpoint, { projectId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function getEndpoint(em: EntityManager, projectId: string, id: string): Promise<WebhookEndpoint> {
  const endpoint = await em.findOne(WebhookEndpoint, { id, projectId });
  if (!endpoint) throw notFound('Webhook endpoint');
  return endpoint;
}

/** Changes what is given; enabling again clears why it was disabled and its failure streak. */
export async function updateEndpoint(em: EntityManager, projectId: string, id: string, input: EndpointInput): Promise<WebhookEndpoint> {
  const endpoint = await getEndpoint(em, projectId, id);
  if (input.enabled && !endpoint.enabled) {
    endpoint.disabledReason = null;
    endpoint.failingSince = null;
  }
  if (input.url !== undefined) endpoint.url = input.url;
  if (input.events !== undefined) endpoint.events = input.events;
  if (input.description !== undefined) endpoint.description = input.description;
  if (input.enabled !== undefined) endpoint.enabled = input.enabled;
  // Every PATCH counts as an update, even one that changes nothing.
  endpoint.updatedAt = new Date();
  await em.flush();
  return endpoint;
}

export async function deleteEndpoint(em: EntityManager, projectId: string, id: string): Promise<void> {
  if (!(await em.nativeDelete(WebhookEndpoint, { id, projectId }))) throw notFound('Webhook endpoint');
}

/** A new secret; the old one keeps signing for ROTATION_OVERLAP_MS. */
export async function rotateSecret(em: EntityManager, projectId: string, id: string): Promise<WebhookEndpoint> {
  const endpoint = await rotateEndpointSecret(em, projectId, id, newSecret(), ROTATION_OVERLAP_MS / 1000);
  if (!endpoint) throw notFound('Webhook endpoint');
  return endpoint;
}

/** Queues a `webhook.test` message to the endpoint (enabled or not: the user asked for it). */
export async function queueTestDelivery(em: EntityManager, endpoint: WebhookEndpoint): Promise<WebhookDelivery> {
  const body = JSON.stringify({ type: 'webhook.test', timestamp: new Date().toISOString(), data: { endpointId: endpoint.id } });
  const delivery = em.create(WebhookDelivery, { id: newId(), endpointId: endpoint.id, projectId: endpoint.projectId, eventType: 'webhook.test', body });
  await em.persist(delivery).flush();
  await notifyWebhookDispatchers(em);
  return delivery;
}

/** Sends a delivery again now, from a fresh series of attempts (a FAILED one, or a PENDING one waiting for its next). */
export async function retryDelivery(em: EntityManager, projectId: string, endpointId: string, deliveryId: string): Promise<WebhookDelivery> {
  await getEndpoint(em, projectId, endpointId);
  // Conditional: a delivery a dispatcher has just recorded as SUCCEEDED is not sent again.
  const requeued = await em.nativeUpdate(
    WebhookDelivery,
    { id: deliveryId, endpointId, status: { $ne: 'SUCCEEDED' } },
    { status: 'PENDING', attempts: 0, nextAttemptAt: raw('now()'), claimedUntil: null },
  );
  const delivery = await em.findOne(WebhookDelivery, { id: deliveryId, endpointId }, { refresh: true });
  if (!delivery) throw notFound('Delivery');
  if (!requeued) throw simpleBadRequest('The delivery already succeeded');
  await notifyWebhookDispatchers(em);
  return delivery;
}

/** Finished deliveries are kept in the log this long. */
const DELIVERY_LOG_DAYS = 30;

/** Drops finished deliveries older than DELIVERY_LOG_DAYS (the maintenance schedule's purge). */
export function purgeWebhookDeliveries(em: EntityManager): Promise<number> {
  return em.nativeDelete(WebhookDelivery, { status: { $ne: 'PENDING' }, createdAt: { $lt: new Date(Date.now() - DELIVERY_LOG_DAYS * 86_400_000) } });
}

/** An endpoint's deliveries, newest first, by cursor (the id of the previous page's last one). */
export async function listDeliveries(
  em: EntityManager,
  projectId: string,
  endpointId: string,
  q: { limit: number; cursor?: string; status?: (typeof deliveryStatus)[number] },
): Promise<{ data: ReturnType<typeof toDeliveryDto>[]; cursor: string; hasMore: boolean; total: number }> {
  await getEndpoint(em, projectId, endpointId);
  const filter = { endpointId, ...(q.status ? { status: q.status } : {}) };
  const page = em
    .createQueryBuilder(WebhookDelivery)
    .where(filter)
    .orderBy({ createdAt: 'desc', id: 'desc' })
    .limit(q.limit + 1);
  if (q.cursor) {
    // The anchor's created_at as PostgreSQL stores it: a Date would round its microseconds away.
    const anchor = await em
      .createQueryBuilder(WebhookDelivery)
      .select('createdAt')
      .where({ id: q.cursor, endpointId })
      .execute<{ created_at: string } | undefined>('get', false);
    if (!anchor) throw simpleBadRequest('Invalid cursor');
    page.andWhere('(created_at, id) < (?, ?)', [anchor.created_at, q.cursor]);
  }
  const rows = await page.getResultList();
  const data = rows.slice(0, q.limit);
  const total = q.cursor ? 0 : await em.count(WebhookDelivery, filter);
  return { data: data.map(toDeliveryDto), cursor: data.length ? data[data.length - 1].id : '', hasMore: rows.length > q.limit, total };
}
