import type Router from '@koa/router';
import { content, endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { uuidPath } from '../../validation';
import { inboundEmailListQuery, inboundEmailListResponse, inboundEmailResponse } from './inbound-emails.schemas';
import { getInboundEmail, listInboundEmails, rawInboundEmail, toInboundEmailDto } from './inbound-emails.service';

const tag = 'Inbound emails';
const NOT_FOUND = { 404: 'No such received message in the project' };

/** Mail received at the project's inbound hosts (`inbound.<domain>`, docs/smtp.md). */
export function inboundEmailRoutes(router: Router, g: Guards): void {
  router.get(
    '/inbound-emails',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List received messages (offset pagination, newest first)',
        query: inboundEmailListQuery,
        responses: { 200: inboundEmailListResponse.describe('A page of received messages') },
      },
      async (ctx, input) => {
        ctx.body = await listInboundEmails(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );

  router.get(
    '/inbound-emails/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'A received message, parsed',
        params: { id: uuidPath },
        responses: { 200: inboundEmailResponse.describe('The message') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = toInboundEmailDto(await getInboundEmail(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.get(
    '/inbound-emails/:id/raw',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'A received message as it came',
        params: { id: uuidPath },
        responses: { 200: content('message/rfc822', 'The original message, byte for byte') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.type = 'message/rfc822';
        ctx.body = await rawInboundEmail(ctx.state.em, ctx.state.project!.id, input.param('id'));
      },
    ),
  );
}
