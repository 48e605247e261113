import type Router from '@koa/router';
import { z } from 'zod';
import type { WorkflowStarter } from '../workflow-starter';
import { endpoint, simpleError } from '../../http/endpoint';
import { simpleBadRequest } from '../../errors';
import type { Guards } from '../../http/guards';
import { pageQuery } from '../../http/pagination';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import { contactResponse } from '../contacts';
import { toContactDto } from '../contacts';
import type { ActivityHub } from '../../bus/contact-activity';
import {
  addMembersSchema,
  computedSegmentResponse,
  createSegmentSchema,
  membersAddedResponse,
  membersRemovedResponse,
  removeMembersSchema,
  segmentResponse,
  updateSegmentSchema,
} from './segments.schemas';
import {
  addStaticMembers,
  defineSegment,
  deleteSegment,
  getSegment,
  listSegments,
  recomputeSegment,
  redefineSegment,
  refreshSegment,
  removeStaticMembers,
  segmentContacts,
  toSegmentDto,
} from './segments.service';

export interface SegmentDeps {
  temporal: WorkflowStarter;
  hub: ActivityHub;
}

const tag = 'Segments';
const params = { id: uuidPath };
const NOT_FOUND = { 404: 'No such segment in the project' };
const memberPage = z.object({ ...pageQuery });
const memberPageResponse = z.object({ data: z.array(contactResponse), total: z.number().int(), page: z.number().int(), pageSize: z.number().int() });

export function segmentRoutes(router: Router, g: Guards, deps: SegmentDeps): void {
  router.post(
    '/segments',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Create a segment',
        description: 'A DYNAMIC segment’s members are the contacts its condition matches; a STATIC one’s are managed with /members.',
        body: createSegmentSchema,
        responses: { 201: segmentResponse.describe('The new segment, counted') },
        errors: { 400: simpleError('name is missing, or a DYNAMIC segment’s condition is missing or invalid') },
      },
      async (ctx, input) => {
        // The spec answers a missing name with its simple 400, before any other validation.
        const raw = (ctx.request.body ?? {}) as Record<string, unknown>;
        if (typeof raw.name !== 'string' || !raw.name.trim()) throw simpleBadRequest('name is required');
        const projectId = ctx.state.project!.id;
        const { segment, events } = await defineSegment(ctx.state.em, deps.temporal, projectId, input.body());
        if (events.length) deps.hub.publish({ projectId, contactIds: [], events });
        ctx.status = 201;
        ctx.body = toSegmentDto(segment);
      },
    ),
  );

  router.get(
    '/segments',
    g.secret,
    endpoint(
      { tag, summary: 'List all segments (unpaginated)', responses: { 200: z.array(segmentResponse).describe('Every segment of the project') } },
      async (ctx) => {
        ctx.body = (await listSegments(ctx.state.em, ctx.state.project!.id)).map(toSegmentDto);
      },
    ),
  );

  router.get(
    '/segments/:id',
    g.secret,
    endpoint(
      { tag, summary: 'Get a segment with its cached member count', params, responses: { 200: segmentResponse.describe('The segment') }, errors: NOT_FOUND },
      async (ctx, input) => {
        ctx.body = toSegmentDto(await getSegment(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.patch(
    '/segments/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Update a segment’s name, description, condition (DYNAMIC only) or trackMembership',
        description: 'A changed definition takes effect at once: the count, and for tracked segments the membership (with entry and exit events).',
        params,
        body: updateSegmentSchema,
        responses: { 200: segmentResponse.describe('The updated segment') },
        errors: { ...NOT_FOUND, 400: simpleError('A condition on a STATIC segment, or an invalid condition') },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const { segment, events } = await redefineSegment(ctx.state.em, projectId, input.param('id'), input.body());
        if (events.length) deps.hub.publish({ projectId, contactIds: [], events });
        ctx.body = toSegmentDto(segment);
      },
    ),
  );

  router.delete(
    '/segments/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a segment',
        params,
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: { ...NOT_FOUND, 409: 'An active campaign uses the segment' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteSegment(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.get(
    '/segments/:id/contacts',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'The segment’s members, a page at a time (live for DYNAMIC segments)',
        params,
        query: memberPage,
        responses: { 200: memberPageResponse.describe('A page of contacts') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const { page, pageSize } = input.query();
        const { rows, total } = await segmentContacts(ctx.state.em, ctx.state.project!.id, input.param('id'), page, pageSize);
        ctx.body = { data: rows.map(toContactDto), total, page, pageSize };
      },
    ),
  );

  router.post(
    '/segments/:id/members',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Add emails to a STATIC segment',
        params,
        body: addMembersSchema,
        responses: { 200: membersAddedResponse.describe('What was added') },
        errors: { ...NOT_FOUND, 400: simpleError('The segment is not STATIC') },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const members = input.body();
        const out = await addStaticMembers(ctx.state.em, projectId, input.param('id'), members.emails, members);
        deps.hub.publish({ projectId, contactIds: out.contactIds, events: out.events });
        ctx.body = out.result;
      },
    ),
  );

  router.delete(
    '/segments/:id/members',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Remove emails from a STATIC segment',
        params,
        body: removeMembersSchema,
        responses: { 200: membersRemovedResponse.describe('What was removed') },
        errors: { ...NOT_FOUND, 400: simpleError('The segment is not STATIC') },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const out = await removeStaticMembers(ctx.state.em, projectId, input.param('id'), input.body().emails);
        deps.hub.publish({ projectId, contactIds: out.contactIds, events: out.events });
        ctx.body = out.result;
      },
    ),
  );

  router.post(
    '/segments/:id/compute',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Recompute membership now (entry and exit events for tracked segments)',
        params,
        responses: { 200: computedSegmentResponse.describe('The segment, and how many entered and exited') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const { segment, events, computed } = await recomputeSegment(ctx.state.em, projectId, input.param('id'));
        if (events.length) deps.hub.publish({ projectId, contactIds: [], events });
        ctx.body = { ...toSegmentDto(segment), computed };
      },
    ),
  );

  router.post(
    '/segments/:id/refresh',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Refresh the member count only (no events, no membership writes)',
        params,
        responses: { 200: segmentResponse.describe('The recounted segment') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = toSegmentDto(await refreshSegment(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );
}
