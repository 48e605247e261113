import type Router from '@koa/router';
import { z } from 'zod';
import { endpoint, simpleError } from '../../http/endpoint';
import { simpleBadRequest, validationError } from '../../errors';
import { isUuid } from '../../db/ids';
import { multipartFile, withUploadedFile } from '../../http/multipart';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import type { ActivityHub } from '../../bus/contact-activity';
import { resolveDataMap } from './data-map';
import type { WorkflowStarter } from '../workflow-starter';
import { type BulkKind, createBulkJob, getBulkJob, toBulkJobDto } from './bulk-jobs';
import { createImport, getImport, toImportDto } from './contact-imports';
import { deleteField, fieldUsage, fieldValues, listFields } from './contact-fields';
import {
  bulkJobResponse,
  bulkSchema,
  contactListQuery,
  contactListResponse,
  contactWithTopicsResponse,
  createContactSchema,
  fieldDeletedResponse,
  fieldsResponse,
  fieldUsageResponse,
  fieldValuesQuery,
  fieldValuesResponse,
  importFieldsSchema,
  importJobResponse,
  lookupResponse,
  lookupSchema,
  patchContactSchema,
  snoozeEnd,
  upsertedContactResponse,
} from './contacts.schemas';
import { deleteContact, getContact, listContacts, lookupContacts, saveContact, toContactDto, updateContact } from './contacts.service';
import { topicStatesOf } from '../topics';

export interface ContactHooks {
  /** A snooze is being set: arrange, durably, for the contact to be resubscribed at `until`. */
  snoozed(contact: { id: string; projectId: string; until: Date }): Promise<void>;
  hub: ActivityHub;
  temporal: WorkflowStarter;
  /** Topics were left pending (double opt-in), committed: mail the contact a confirmation. */
  confirmationNeeded(request: { projectId: string; contactId: string; topicIds: string[]; ip: string | null; userAgent: string | null }): Promise<unknown>;
}

/** POST /contacts/import: the spec's limit on the CSV file. */
const IMPORT_MAX_BYTES = 5 * 1024 * 1024;

const tag = 'Contacts';
const customField = z.string().meta({ description: 'A custom (data) field name' });

/** The import's topic fields, read from the multipart form: 422 naming the field when unusable. */
function importTopics(body: unknown): { topicIds: string[]; doubleOptIn: boolean } {
  const parsed = importFieldsSchema.safeParse(body ?? {});
  if (!parsed.success) throw validationError(parsed.error.issues);
  const topicIds = [...new Set([parsed.data.topics ?? []].flat().flatMap((v) => v.split(',').map((id) => id.trim().toLowerCase())))].filter(Boolean);
  const bad = topicIds.find((id) => !isUuid(id));
  if (bad) throw validationError([{ code: 'custom', path: ['topics'], message: `${bad} is not a topic id`, input: bad }]);
  return { topicIds, doubleOptIn: parsed.data.doubleOptIn === 'true' };
}

export function contactRoutes(router: Router, g: Guards, hooks: ContactHooks): void {
  router.post(
    '/contacts',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Create a contact, or update the one with the same email',
        body: createContactSchema,
        responses: { 201: upsertedContactResponse.describe('Created'), 200: upsertedContactResponse.describe('Updated') },
        errors: { 400: simpleError('email is missing') },
      },
      async (ctx, input) => {
        // The spec answers a missing email with its simple 400, before any other validation.
        const raw = (ctx.request.body ?? {}) as Record<string, unknown>;
        if (raw.email === undefined || raw.email === null || raw.email === '') throw simpleBadRequest('email is required');
        const { email, subscribed, data } = input.body();
        const projectId = ctx.state.project!.id;
        const result = await saveContact(ctx.state.em, projectId, { email, subscribed, data: resolveDataMap(data) });
        hooks.hub.publish({ projectId, contactIds: [result.contact.id], events: result.events });
        ctx.status = result.isNew ? 201 : 200;
        ctx.body = { ...toContactDto(result.contact), _meta: { isNew: result.isNew, isUpdate: !result.isNew } };
      },
    ),
  );

  router.get(
    '/contacts',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List contacts (cursor pagination)',
        query: contactListQuery,
        responses: { 200: contactListResponse.describe('A cursor page of contacts') },
        errors: { 400: simpleError('An invalid cursor, subscribed or status') },
      },
      async (ctx, input) => {
        ctx.body = await listContacts(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );

  router.post(
    '/contacts/lookup',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Which of up to 500 emails are contacts',
        body: lookupSchema,
        responses: { 200: lookupResponse.describe('Found contacts and missing emails') },
      },
      async (ctx, input) => {
        ctx.body = await lookupContacts(ctx.state.em, ctx.state.project!.id, input.body().emails);
      },
    ),
  );

  router.get(
    '/contacts/fields',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Standard and custom fields, with inferred types and coverage',
        responses: { 200: fieldsResponse.describe('Standard fields first, then custom ones by count') },
      },
      async (ctx) => {
        ctx.body = await listFields(ctx.state.em, ctx.state.project!.id);
      },
    ),
  );

  router.get(
    '/contacts/fields/:field/values',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'The most common values of a custom field',
        params: { field: customField },
        query: fieldValuesQuery,
        responses: { 200: fieldValuesResponse.describe('Values with how many contacts have each') },
        errors: { 400: 'A standard field (INVALID_FIELD)', 404: 'No contact has the field' },
      },
      async (ctx, input) => {
        ctx.body = await fieldValues(ctx.state.em, ctx.state.project!.id, input.param('field'), input.query().limit);
      },
    ),
  );

  router.get(
    '/contacts/fields/:field/usage',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Where a custom field is referenced',
        params: { field: customField },
        responses: { 200: fieldUsageResponse.describe('The segments, campaigns and workflows that name it') },
        errors: { 400: 'A standard field (INVALID_FIELD)' },
      },
      async (ctx, input) => {
        ctx.body = await fieldUsage(ctx.state.em, ctx.state.project!.id, input.param('field'));
      },
    ),
  );

  router.delete(
    '/contacts/fields/:field',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a custom field from every contact',
        params: { field: customField },
        responses: { 200: fieldDeletedResponse.describe('How many contacts had it') },
        errors: { 400: 'A standard field (INVALID_FIELD)' },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const { field, contacts } = await deleteField(ctx.state.em, projectId, input.param('field'));
        hooks.hub.publish({ projectId, contactIds: contacts, events: [] });
        ctx.body = { field, deleted: true, contactsUpdated: contacts.length };
      },
    ),
  );

  const csvUpload = multipartFile(IMPORT_MAX_BYTES, 'The CSV file is larger than 5 MB');
  router.post(
    '/contacts/import',
    g.secret,
    csvUpload,
    endpoint(
      {
        tag,
        summary: 'Import contacts from a CSV file (queued)',
        description:
          'The file’s email column is found by its header (or is the first column); other columns become data fields. Poll GET /contacts/import/{jobId}.',
        upload: { field: 'file', description: 'A CSV file, at most 5 MB', fields: importFieldsSchema },
        responses: { 202: importJobResponse.describe('The queued import job') },
        errors: {
          400: simpleError('Not a multipart body'),
          413: 'The file is larger than 5 MB',
          422: 'No file in the field `file`, or a field `topics` naming ids that are not the project’s topics',
        },
      },
      async (ctx) => {
        const topics = importTopics(ctx.request.body);
        const job = await withUploadedFile(ctx, 'file', 'A CSV file', (file) =>
          createImport(ctx.state.em, hooks.temporal, ctx.state.project!.id, { path: file.filepath, name: file.originalFilename, size: file.size }, topics),
        );
        ctx.status = 202;
        ctx.body = toImportDto(job);
      },
    ),
  );

  router.get(
    '/contacts/import/:jobId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Poll an import job',
        params: { jobId: uuidPath },
        responses: { 200: importJobResponse.describe('The import job') },
        errors: { 404: 'No such job in the project' },
      },
      async (ctx, input) => {
        ctx.body = toImportDto(await getImport(ctx.state.em, ctx.state.project!.id, input.param('jobId')));
      },
    ),
  );

  // Queued: each answers 202 with the job, which GET /contacts/bulk/:jobId polls.
  for (const [path, kind] of [
    ['/contacts/bulk-subscribe', 'subscribe'],
    ['/contacts/bulk-unsubscribe', 'unsubscribe'],
    ['/contacts/bulk-delete', 'delete'],
  ] as Array<[string, BulkKind]>) {
    router.post(
      path,
      g.secret,
      endpoint(
        {
          tag,
          summary: `${kind[0].toUpperCase()}${kind.slice(1)} up to 1,000 contacts by id (queued)`,
          body: bulkSchema,
          responses: { 202: bulkJobResponse.describe('The queued job') },
          errors: { 422: kind === 'delete' ? 'Invalid ids, or a topicId (a delete has none)' : 'Invalid ids, or a topicId that is not the project’s' },
        },
        async (ctx, input) => {
          const { contactIds, topicId } = input.body();
          const job = await createBulkJob(ctx.state.em, hooks.temporal, ctx.state.project!.id, kind, contactIds, topicId);
          ctx.status = 202;
          ctx.body = toBulkJobDto(job);
        },
      ),
    );
  }

  router.get(
    '/contacts/bulk/:jobId',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Poll a bulk job',
        params: { jobId: uuidPath },
        responses: { 200: bulkJobResponse.describe('The bulk job') },
        errors: { 404: 'No such job in the project' },
      },
      async (ctx, input) => {
        ctx.body = toBulkJobDto(await getBulkJob(ctx.state.em, ctx.state.project!.id, input.param('jobId')));
      },
    ),
  );

  router.get(
    '/contacts/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Get a contact',
        params: { id: uuidPath },
        responses: { 200: contactWithTopicsResponse.describe('The contact, with its state in every topic') },
        errors: { 404: 'No such contact in the project' },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const contact = await getContact(ctx.state.em, projectId, input.param('id'));
        ctx.body = { ...toContactDto(contact), topics: await topicStatesOf(ctx.state.em, projectId, contact.id) };
      },
    ),
  );

  router.patch(
    '/contacts/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a contact’s email, subscription, snooze, data or topics',
        description:
          'Snooze with `snooze` (a duration) or `snoozedUntil` (a future time); `snoozedUntil: null` ends a snooze. ' +
          '`topics` joins (true) or leaves (false) topics by id; a join where double opt-in applies stays `pending` until confirmed.',
        params: { id: uuidPath },
        body: patchContactSchema,
        responses: { 200: contactWithTopicsResponse.describe('The updated contact, with its state in every topic') },
        errors: {
          404: 'No such contact in the project',
          409: 'Another contact has that email',
          422: 'Invalid fields, or a topic id that is not the project’s',
        },
      },
      async (ctx, input) => {
        const id = input.param('id');
        const patch = input.body();
        const projectId = ctx.state.project!.id;
        const until = patch.snooze ? snoozeEnd(patch.snooze) : patch.snoozedUntil ? new Date(patch.snoozedUntil) : undefined;
        const result = await updateContact(
          ctx.state.em,
          projectId,
          id,
          {
            email: patch.email,
            subscribed: patch.subscribed,
            data: patch.data ? resolveDataMap(patch.data) : undefined,
            snoozedUntil: until,
            endSnooze: patch.snoozedUntil === null,
            topics: patch.topics,
          },
          until ? () => hooks.snoozed({ id, projectId, until }) : undefined,
        );
        hooks.hub.publish({ projectId, contactIds: [id], events: result.events });
        if (result.pending.length) {
          await hooks.confirmationNeeded({ projectId, contactId: id, topicIds: result.pending, ip: ctx.ip || null, userAgent: ctx.get('user-agent') || null });
        }
        ctx.body = { ...toContactDto(result.contact), topics: await topicStatesOf(ctx.state.em, projectId, id) };
      },
    ),
  );

  router.delete(
    '/contacts/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a contact',
        params: { id: uuidPath },
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: { 404: 'No such contact in the project' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteContact(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );
}
