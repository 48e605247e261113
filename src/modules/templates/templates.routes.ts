import type Router from '@koa/router';
import { endpoint, simpleError } from '../../http/endpoint';
import { simpleBadRequest } from '../../errors';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import type { Links } from '../../mail/links';
import { PREVIEW_DESCRIPTION, previewMessage, previewResponse, previewSchema } from './message-preview';
import { sendableBody } from './template-content';
import {
  createTemplateSchema,
  REQUIRED_TEMPLATE_FIELDS,
  templateListQuery,
  templateListResponse,
  templateResponse,
  templateUsageResponse,
  updateTemplateSchema,
} from './templates.schemas';
import {
  createTemplate,
  deleteTemplate,
  duplicateTemplate,
  getTemplate,
  listTemplates,
  templateUsage,
  toTemplateDto,
  updateTemplate,
} from './templates.service';

const tag = 'Templates';
const NOT_FOUND = { 404: 'No such template in the project' };
const UNVERIFIED = 'The sender domain is not registered to the project or not verified';

export function templateRoutes(router: Router, g: Guards, deps: { links: Links }): void {
  router.post(
    '/templates',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Create a template',
        body: createTemplateSchema,
        responses: { 201: templateResponse.describe('The new template') },
        errors: { 400: simpleError('A required field is missing'), 403: UNVERIFIED },
      },
      async (ctx, input) => {
        // The spec answers missing required fields with its simple 400, before any other validation.
        const raw = (ctx.request.body ?? {}) as Record<string, unknown>;
        const missing = REQUIRED_TEMPLATE_FIELDS.filter((f) => raw[f] === undefined || raw[f] === null || raw[f] === '');
        if (missing.length) throw simpleBadRequest(`Missing required field${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`);
        const template = input.body();
        ctx.status = 201;
        ctx.body = toTemplateDto(await createTemplate(ctx.state.em, ctx.state.project!.id, template));
      },
    ),
  );

  router.get(
    '/templates',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List templates (offset pagination)',
        query: templateListQuery,
        responses: { 200: templateListResponse.describe('A page of templates') },
        errors: { 400: simpleError('type is not a template type') },
      },
      async (ctx, input) => {
        ctx.body = await listTemplates(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );

  router.get(
    '/templates/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Get a template', params: { id: uuidPath }, responses: { 200: templateResponse.describe('The template') }, errors: NOT_FOUND },
      async (ctx, input) => {
        ctx.body = toTemplateDto(await getTemplate(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.patch(
    '/templates/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a template',
        params: { id: uuidPath },
        body: updateTemplateSchema,
        responses: { 200: templateResponse.describe('The updated template') },
        errors: { ...NOT_FOUND, 403: UNVERIFIED },
      },
      async (ctx, input) => {
        const id = input.param('id');
        ctx.body = toTemplateDto(await updateTemplate(ctx.state.em, ctx.state.project!.id, id, input.body()));
      },
    ),
  );

  router.delete(
    '/templates/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Delete a template', params: { id: uuidPath }, responses: { 200: deletedResponse.describe('Deleted') }, errors: NOT_FOUND },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteTemplate(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.post(
    '/templates/:id/duplicate',
    g.secret,
    endpoint(
      { tag, summary: 'Duplicate a template', params: { id: uuidPath }, responses: { 201: templateResponse.describe('The copy') }, errors: NOT_FOUND },
      async (ctx, input) => {
        ctx.status = 201;
        ctx.body = toTemplateDto(await duplicateTemplate(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.get(
    '/templates/:id/usage',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Workflow steps that send the template',
        params: { id: uuidPath },
        responses: { 200: templateUsageResponse.describe('Where it is used') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const id = input.param('id');
        await getTemplate(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = await templateUsage(ctx.state.em, ctx.state.project!.id, id);
      },
    ),
  );

  router.post(
    '/templates/:id/preview',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Render the template for a contact or for data, sending nothing',
        description: PREVIEW_DESCRIPTION,
        params: { id: uuidPath },
        body: previewSchema,
        responses: { 200: previewResponse.describe('The rendered message') },
        errors: { 404: 'No such template (or contact) in the project' },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const t = await getTemplate(ctx.state.em, projectId, input.param('id'));
        const message = { type: t.type, subject: t.subject, body: sendableBody(t), tracking: t.tracking };
        ctx.body = await previewMessage(ctx.state.em, projectId, message, input.body(), deps.links);
      },
    ),
  );
}
