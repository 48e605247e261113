import type Router from '@koa/router';
import { simpleBadRequest } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { pageParams, sortParams } from '../../http/pagination';
import { body, queryValue, uuidParam } from '../../http/validate';
import { createTemplateSchema, REQUIRED_TEMPLATE_FIELDS, TEMPLATE_TYPES, updateTemplateSchema } from './templates.schemas';
import {
  createTemplate,
  deleteTemplate,
  duplicateTemplate,
  getTemplate,
  listTemplates,
  templateUsage,
  type TemplateListQuery,
  toTemplateDto,
  updateTemplate,
} from './templates.service';

const SORTS = { name: 'name', createdAt: 'created_at', updatedAt: 'updated_at' } as const;

export function templateRoutes(router: Router, g: Guards): void {
  router.post('/templates', g.secret, async (ctx) => {
    const raw = (ctx.request.body ?? {}) as Record<string, unknown>;
    const missing = REQUIRED_TEMPLATE_FIELDS.filter((f) => raw[f] === undefined || raw[f] === null || raw[f] === '');
    if (missing.length) throw simpleBadRequest(`Missing required field${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`);
    const input = body(ctx, createTemplateSchema);
    ctx.status = 201;
    ctx.body = toTemplateDto(await createTemplate(ctx.state.em, ctx.state.project!.id, input));
  });

  router.get('/templates', g.secret, async (ctx) => {
    const type = queryValue(ctx, 'type') || undefined;
    if (type && !(TEMPLATE_TYPES as readonly string[]).includes(type)) {
      throw simpleBadRequest(`type must be one of ${TEMPLATE_TYPES.join(', ')}`);
    }
    const q: TemplateListQuery = {
      ...pageParams(ctx),
      ...sortParams(ctx, SORTS, 'createdAt'),
      type: type as TemplateListQuery['type'],
      search: queryValue(ctx, 'search')?.trim() || undefined,
    };
    ctx.body = await listTemplates(ctx.state.em, ctx.state.project!.id, q);
  });

  router.get('/templates/:id', g.secret, async (ctx) => {
    ctx.body = toTemplateDto(await getTemplate(ctx.state.em, ctx.state.project!.id, uuidParam(ctx)));
  });

  router.patch('/templates/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    ctx.body = toTemplateDto(await updateTemplate(ctx.state.em, ctx.state.project!.id, id, body(ctx, updateTemplateSchema)));
  });

  router.delete('/templates/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    await deleteTemplate(ctx.state.em, ctx.state.project!.id, id);
    ctx.body = { id, deleted: true };
  });

  router.post('/templates/:id/duplicate', g.secret, async (ctx) => {
    ctx.status = 201;
    ctx.body = toTemplateDto(await duplicateTemplate(ctx.state.em, ctx.state.project!.id, uuidParam(ctx)));
  });

  router.get('/templates/:id/usage', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    await getTemplate(ctx.state.em, ctx.state.project!.id, id);
    ctx.body = await templateUsage(ctx.state.em, ctx.state.project!.id, id);
  });
}
