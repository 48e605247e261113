import { Readable } from 'node:stream';
import type Router from '@koa/router';
import type { WorkflowStarter } from '../workflow-starter';
import { multipartFile, withUploadedFile } from '../../http/multipart';
import { content, endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { emailSchema, uuidPath } from '../../validation';
import {
  addSuppressionsResponse,
  addSuppressionsSchema,
  checkResponse,
  checkSchema,
  createRuleSchema,
  deletedSuppressionResponse,
  importJobResponse,
  ruleListResponse,
  ruleResponse,
  suppressionListQuery,
  suppressionListResponse,
  updateRuleSchema,
} from './suppressions.schemas';
import { createSuppressionImport, getSuppressionImport, SLICE_BYTES, toSuppressionImportDto } from './suppression-imports';
import {
  addManualSuppressions,
  checkSuppression,
  createRule,
  deleteRule,
  deleteSuppression,
  exportSuppressions,
  getRule,
  listRules,
  listSuppressions,
  toRuleDto,
  updateRule,
} from './suppressions.service';

const tag = 'Suppressions';
const RULE_NOT_FOUND = { 404: 'No such rule in the project' };

/** POST /suppressions/import: the limit on the CSV file (a list brought from another provider can be long). */
const IMPORT_MAX_BYTES = 20 * 1024 * 1024;

export function suppressionRoutes(router: Router, g: Guards, deps: { temporal: WorkflowStarter }): void {
  router.get(
    '/suppressions',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List suppressed addresses (offset pagination, newest first)',
        query: suppressionListQuery,
        responses: { 200: suppressionListResponse.describe('A page of the suppression list') },
      },
      async (ctx, input) => {
        ctx.body = await listSuppressions(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );

  router.post(
    '/suppressions',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Suppress addresses by hand (reason MANUAL)',
        body: addSuppressionsSchema,
        responses: { 200: addSuppressionsResponse.describe('Which addresses this call listed') },
      },
      async (ctx, input) => {
        ctx.body = await addManualSuppressions(ctx.state.em, ctx.state.project!.id, input.body().emails);
      },
    ),
  );

  router.get(
    '/suppressions/export',
    g.secret,
    endpoint(
      { tag, summary: 'The whole suppression list as CSV', responses: { 200: content('text/csv', 'Columns email,reason,createdAt, one row per address') } },
      (ctx) => {
        ctx.type = 'text/csv; charset=utf-8';
        ctx.attachment('suppressions.csv');
        ctx.body = Readable.from(exportSuppressions(ctx.state.em, ctx.state.project!.id));
      },
    ),
  );

  router.post(
    '/suppressions/import',
    g.secret,
    multipartFile(IMPORT_MAX_BYTES, 'The CSV file is larger than 20 MB'),
    endpoint(
      {
        tag,
        summary: 'Suppress the addresses of a CSV file (reason MANUAL)',
        description:
          `The address is the \`email\` column of the header (else the first column). A file of at most ${SLICE_BYTES / 1024} KB is imported at once ` +
          '(200, with the counts); a larger one runs as a job (202): poll GET /suppressions/import/{jobId}.',
        upload: { field: 'file', description: 'A CSV file, at most 20 MB' },
        responses: { 200: importJobResponse.describe('The completed import'), 202: importJobResponse.describe('The queued import job') },
        errors: { 400: 'Not a multipart body', 413: 'The file is larger than 20 MB', 422: 'No file in the field `file`' },
      },
      async (ctx) => {
        const { job, queued } = await withUploadedFile(ctx, 'file', 'A CSV file', (file) =>
          createSuppressionImport(ctx.state.em, deps.temporal, ctx.state.project!.id, { path: file.filepath, name: file.originalFilename, size: file.size }),
        );
        ctx.status = queued ? 202 : 200;
        ctx.body = toSuppressionImportDto(job);
      },
    ),
  );

  router.get(
    '/suppressions/import/:jobId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Poll an import of suppressed addresses',
        params: { jobId: uuidPath },
        responses: { 200: importJobResponse.describe('The import job') },
        errors: { 404: 'No such job in the project' },
      },
      async (ctx, input) => {
        ctx.body = toSuppressionImportDto(await getSuppressionImport(ctx.state.em, ctx.state.project!.id, input.param('jobId')));
      },
    ),
  );

  router.post(
    '/suppressions/check',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Whether mail to an address would be suppressed, and why',
        body: checkSchema,
        responses: { 200: checkResponse.describe('The list is asked first, then the enabled rules') },
      },
      async (ctx, input) => {
        ctx.body = await checkSuppression(ctx.state.em, ctx.state.project!.id, input.body().email);
      },
    ),
  );

  router.get(
    '/suppressions/rules',
    g.secret,
    endpoint(
      { tag, summary: 'List suppression rules, oldest first', responses: { 200: ruleListResponse.describe('Every rule of the project') } },
      async (ctx) => {
        ctx.body = await listRules(ctx.state.em, ctx.state.project!.id);
      },
    ),
  );

  router.post(
    '/suppressions/rules',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Create a suppression rule',
        description: 'At most 100 rules per project. PREFIX and SUFFIX apply to the local part; WILDCARD to the whole address.',
        body: createRuleSchema,
        responses: { 201: ruleResponse.describe('The new rule') },
      },
      async (ctx, input) => {
        ctx.status = 201;
        ctx.body = toRuleDto(await createRule(ctx.state.em, ctx.state.project!.id, input.body()));
      },
    ),
  );

  router.get(
    '/suppressions/rules/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Get a suppression rule', params: { id: uuidPath }, responses: { 200: ruleResponse.describe('The rule') }, errors: RULE_NOT_FOUND },
      async (ctx, input) => {
        ctx.body = toRuleDto(await getRule(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.patch(
    '/suppressions/rules/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a suppression rule (enable or disable it with `enabled`)',
        params: { id: uuidPath },
        body: updateRuleSchema,
        responses: { 200: ruleResponse.describe('The updated rule') },
        errors: RULE_NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = toRuleDto(await updateRule(ctx.state.em, ctx.state.project!.id, input.param('id'), input.body()));
      },
    ),
  );

  router.delete(
    '/suppressions/rules/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Delete a suppression rule', params: { id: uuidPath }, responses: { 200: deletedResponse.describe('Deleted') }, errors: RULE_NOT_FOUND },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteRule(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.delete(
    '/suppressions/:email',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Lift the suppression of an address: the only way one is lifted',
        params: { email: emailSchema },
        responses: { 200: deletedSuppressionResponse.describe('Lifted') },
        errors: { 404: 'The address is not on the project’s list' },
      },
      async (ctx, input) => {
        const email = input.param('email');
        await deleteSuppression(ctx.state.em, ctx.state.project!.id, email);
        ctx.body = { email, deleted: true };
      },
    ),
  );
}
