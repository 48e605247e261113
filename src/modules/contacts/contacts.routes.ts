import type Router from '@koa/router';
import type { Context } from 'koa';
import { simpleBadRequest } from '../../http/errors';
import { multipartFile, withUploadedFile } from '../../http/multipart';
import type { Guards } from '../../http/guards';
import { body, queryValue, uuidParam } from '../../http/validate';
import { isUuid } from '../../db/ids';
import type { ActivityHub } from '../events/contact-activity';
import { resolveDataMap } from './data-map';
import type { TemporalClient } from '../../../temporal/client';
import { type BulkKind, createBulkJob, getBulkJob, toBulkJobDto } from './bulk-jobs';
import { createImport, getImport, toImportDto } from './contact-imports';
import { deleteField, fieldUsage, fieldValues, listFields } from './contact-fields';
import { bulkSchema, createContactSchema, lookupSchema, patchContactSchema, snoozeEnd } from './contacts.schemas';
import {
  deleteContact,
  getContact,
  listContacts,
  type ListQuery,
  lookupContacts,
  toContactDto,
  updateContact,
  upsertContact,
} from './contacts.service';

export interface ContactHooks {
  /** A snooze is being set: arrange, durably, for the contact to be resubscribed at `until`. */
  snoozed(contact: { id: string; projectId: string; until: Date }): Promise<void>;
  hub: ActivityHub;
  temporal: TemporalClient;
}

function listQuery(ctx: Context): ListQuery {
  const limitRaw = Number.parseInt(queryValue(ctx, 'limit') ?? '', 10);
  const limit = Number.isNaN(limitRaw) ? 20 : Math.min(100, Math.max(1, limitRaw));
  const cursor = queryValue(ctx, 'cursor') || undefined;
  if (cursor && !isUuid(cursor)) throw simpleBadRequest('Invalid cursor');
  const subscribedRaw = queryValue(ctx, 'subscribed');
  if (subscribedRaw !== undefined && subscribedRaw !== '' && subscribedRaw !== 'true' && subscribedRaw !== 'false') {
    throw simpleBadRequest('subscribed must be true or false');
  }
  const status = queryValue(ctx, 'status') || undefined;
  if (status !== undefined && !['subscribed', 'unsubscribed', 'snoozed'].includes(status)) {
    throw simpleBadRequest('status must be one of subscribed, unsubscribed, snoozed');
  }
  return {
    limit,
    cursor,
    search: queryValue(ctx, 'search') || undefined,
    subscribed: subscribedRaw === 'true' ? true : subscribedRaw === 'false' ? false : undefined,
    status: status as ListQuery['status'],
    sort: queryValue(ctx, 'sort') === 'email' ? 'email' : 'createdAt',
    dir: queryValue(ctx, 'dir') === 'asc' ? 'asc' : 'desc',
  };
}

/** POST /contacts/import: the spec's limit on the CSV file. */
const IMPORT_MAX_BYTES = 5 * 1024 * 1024;

export function contactRoutes(router: Router, g: Guards, hooks: ContactHooks): void {
  router.post('/contacts', g.secret, async (ctx) => {
    const raw = (ctx.request.body ?? {}) as Record<string, unknown>;
    if (raw.email === undefined || raw.email === null || raw.email === '') throw simpleBadRequest('email is required');
    const input = body(ctx, createContactSchema);
    const projectId = ctx.state.project!.id;
    const result = await ctx.state.em.transactional((tx) =>
      upsertContact(tx, projectId, {
        email: input.email,
        subscribed: input.subscribed,
        defaultSubscribed: true,
        data: resolveDataMap(input.data),
      }),
    );
    hooks.hub.publish({ projectId, contactIds: [result.contact.id], events: result.events });
    ctx.status = result.isNew ? 201 : 200;
    ctx.body = { ...toContactDto(result.contact), _meta: { isNew: result.isNew, isUpdate: !result.isNew } };
  });

  router.get('/contacts', g.secret, async (ctx) => {
    ctx.body = await listContacts(ctx.state.em, ctx.state.project!.id, listQuery(ctx));
  });

  router.post('/contacts/lookup', g.secret, async (ctx) => {
    const { emails } = body(ctx, lookupSchema);
    ctx.body = await lookupContacts(ctx.state.em, ctx.state.project!.id, emails);
  });

  router.get('/contacts/fields', g.secret, async (ctx) => {
    ctx.body = await listFields(ctx.state.em, ctx.state.project!.id);
  });

  router.get('/contacts/fields/:field/values', g.secret, async (ctx) => {
    const limitRaw = Number.parseInt(queryValue(ctx, 'limit') ?? '', 10);
    const limit = Number.isNaN(limitRaw) ? 50 : Math.min(100, Math.max(1, limitRaw));
    ctx.body = await fieldValues(ctx.state.em, ctx.state.project!.id, ctx.params.field, limit);
  });

  router.get('/contacts/fields/:field/usage', g.secret, async (ctx) => {
    ctx.body = await fieldUsage(ctx.state.em, ctx.state.project!.id, ctx.params.field);
  });

  router.delete('/contacts/fields/:field', g.secret, async (ctx) => {
    const projectId = ctx.state.project!.id;
    const { field, contacts } = await deleteField(ctx.state.em, projectId, ctx.params.field);
    hooks.hub.publish({ projectId, contactIds: contacts, events: [] });
    ctx.body = { field, deleted: true, contactsUpdated: contacts.length };
  });

  const csvUpload = multipartFile(IMPORT_MAX_BYTES, 'The CSV file is larger than 5 MB');
  router.post('/contacts/import', g.secret, csvUpload, async (ctx) => {
    const job = await withUploadedFile(ctx, 'file', 'A CSV file', (file) =>
      createImport(ctx.state.em, hooks.temporal, ctx.state.project!.id, { path: file.filepath, name: file.originalFilename, size: file.size }),
    );
    ctx.status = 202;
    ctx.body = toImportDto(job);
  });

  router.get('/contacts/import/:jobId', g.secret, async (ctx) => {
    ctx.body = toImportDto(await getImport(ctx.state.em, ctx.state.project!.id, uuidParam(ctx, 'jobId')));
  });

  // Queued: each answers 202 with the job, which GET /contacts/bulk/:jobId polls.
  for (const [path, kind] of [
    ['/contacts/bulk-subscribe', 'subscribe'],
    ['/contacts/bulk-unsubscribe', 'unsubscribe'],
    ['/contacts/bulk-delete', 'delete'],
  ] as Array<[string, BulkKind]>) {
    router.post(path, g.secret, async (ctx) => {
      const { contactIds } = body(ctx, bulkSchema);
      const job = await createBulkJob(ctx.state.em, hooks.temporal, ctx.state.project!.id, kind, contactIds);
      ctx.status = 202;
      ctx.body = toBulkJobDto(job);
    });
  }

  router.get('/contacts/bulk/:jobId', g.secret, async (ctx) => {
    ctx.body = toBulkJobDto(await getBulkJob(ctx.state.em, ctx.state.project!.id, uuidParam(ctx, 'jobId')));
  });

  router.get('/contacts/:id', g.secret, async (ctx) => {
    ctx.body = toContactDto(await getContact(ctx.state.em, ctx.state.project!.id, uuidParam(ctx)));
  });

  router.patch('/contacts/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    const input = body(ctx, patchContactSchema);
    const projectId = ctx.state.project!.id;
    const until = input.snooze ? snoozeEnd(input.snooze) : input.snoozedUntil ? new Date(input.snoozedUntil) : undefined;
    const result = await updateContact(
      ctx.state.em,
      projectId,
      id,
      {
        email: input.email,
        subscribed: input.subscribed,
        data: input.data ? resolveDataMap(input.data) : undefined,
        snoozedUntil: until,
        endSnooze: input.snoozedUntil === null,
      },
      until ? () => hooks.snoozed({ id, projectId, until }) : undefined,
    );
    hooks.hub.publish({ projectId, contactIds: [id], events: result.events });
    ctx.body = toContactDto(result.contact);
  });

  router.delete('/contacts/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    await deleteContact(ctx.state.em, ctx.state.project!.id, id);
    ctx.body = { id, deleted: true };
  });
}
