import type Router from '@koa/router';
import { z } from 'zod';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import { refusePrivateTarget } from '../../net/guarded-http';
import {
  createEndpointSchema,
  deliveryListQuery,
  deliveryListResponse,
  deliveryResponse,
  endpointResponse,
  patchEndpointSchema,
} from './webhook-endpoints.schemas';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listDeliveries,
  listEndpoints,
  queueTestDelivery,
  retryDelivery,
  rotateSecret,
  toDeliveryDto,
  toEndpointDto,
  updateEndpoint,
} from './webhook-endpoints.service';

const tag = 'Webhook endpoints';
const NOT_FOUND = { 404: 'No such webhook endpoint in the project' };
const params = { id: uuidPath };

/** Webhooks out, on Standard Webhooks: where the project's events are POSTed, signed and retried. */
export function webhookEndpointRoutes(router: Router, g: Guards, deps: { allowPrivate: boolean }): void {
  router.post(
    '/webhook-endpoints',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Add a webhook endpoint',
        description: 'Every event the project records that it subscribes to is POSTed to it, signed with its `secret` (shown now and on rotation only).',
        body: createEndpointSchema,
        responses: { 201: endpointResponse.describe('The endpoint, with its secret') },
        errors: { 422: 'Not an http(s) URL, or one written as a loopback, private, link-local or metadata address' },
      },
      async (ctx, input) => {
        const body = input.body();
        refusePrivateTarget(body.url, 'url', deps.allowPrivate);
        ctx.status = 201;
        ctx.body = toEndpointDto(await createEndpoint(ctx.state.em, ctx.state.project!.id, body), { secret: true });
      },
    ),
  );

  router.get(
    '/webhook-endpoints',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List the project’s webhook endpoints',
        responses: { 200: z.array(endpointResponse).describe('The endpoints, oldest first') },
        errors: {},
      },
      async (ctx) => {
        ctx.body = (await listEndpoints(ctx.state.em, ctx.state.project!.id)).map((e) => toEndpointDto(e));
      },
    ),
  );

  router.get(
    '/webhook-endpoints/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Get a webhook endpoint', params, responses: { 200: endpointResponse.describe('The endpoint') }, errors: NOT_FOUND },
      async (ctx, input) => {
        ctx.body = toEndpointDto(await getEndpoint(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.patch(
    '/webhook-endpoints/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Change a webhook endpoint',
        description: 'Enabling it again clears why the service disabled it.',
        params,
        body: patchEndpointSchema,
        responses: { 200: endpointResponse.describe('The endpoint') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const body = input.body();
        refusePrivateTarget(body.url, 'url', deps.allowPrivate);
        ctx.body = toEndpointDto(await updateEndpoint(ctx.state.em, ctx.state.project!.id, input.param('id'), body));
      },
    ),
  );

  router.delete(
    '/webhook-endpoints/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Remove a webhook endpoint and its delivery log', params, responses: { 200: deletedResponse.describe('Removed') }, errors: NOT_FOUND },
      async (ctx, input) => {
        await deleteEndpoint(ctx.state.em, ctx.state.project!.id, input.param('id'));
        ctx.body = { id: input.param('id'), deleted: true };
      },
    ),
  );

  router.post(
    '/webhook-endpoints/:id/rotate-secret',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Rotate the endpoint’s secret',
        description: 'The old secret keeps signing beside the new one for 24 hours (two `v1,` signatures).',
        params,
        responses: { 200: endpointResponse.describe('The endpoint, with its new secret') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = toEndpointDto(await rotateSecret(ctx.state.em, ctx.state.project!.id, input.param('id')), { secret: true });
      },
    ),
  );

  router.post(
    '/webhook-endpoints/:id/test',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Send a `webhook.test` event to the endpoint now',
        params,
        responses: { 200: deliveryResponse.describe('The queued delivery') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const e = await getEndpoint(ctx.state.em, ctx.state.project!.id, input.param('id'));
        ctx.body = toDeliveryDto(await queueTestDelivery(ctx.state.em, e));
      },
    ),
  );

  router.get(
    '/webhook-endpoints/:id/deliveries',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'The endpoint’s delivery log, newest first',
        params,
        query: deliveryListQuery,
        responses: { 200: deliveryListResponse.describe('A page of deliveries') },
        errors: { ...NOT_FOUND, 400: 'Invalid cursor or status' },
      },
      async (ctx, input) => {
        ctx.body = await listDeliveries(ctx.state.em, ctx.state.project!.id, input.param('id'), input.query());
      },
    ),
  );

  router.post(
    '/webhook-endpoints/:id/deliveries/:deliveryId/retry',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Send a delivery again now',
        description: 'A FAILED delivery (or a PENDING one waiting for its next attempt) starts a fresh series of attempts.',
        params: { id: uuidPath, deliveryId: uuidPath },
        responses: { 200: deliveryResponse.describe('The delivery, queued') },
        errors: { 404: 'No such endpoint or delivery', 400: 'The delivery already succeeded' },
      },
      async (ctx, input) => {
        ctx.body = toDeliveryDto(await retryDelivery(ctx.state.em, ctx.state.project!.id, input.param('id'), input.param('deliveryId')));
      },
    ),
  );
}
