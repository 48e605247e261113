import type Router from '@koa/router';
import type { TemporalClient } from '../../../temporal/client';
import { holdUntilCommit } from '../../db/orm';
import { simpleBadRequest } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { pageParams } from '../../http/pagination';
import { body, uuidParam } from '../../http/validate';
import { toContactDto } from '../contacts/contacts.service';
import type { ActivityHub } from '../events/contact-activity';
import { startSegmentRefresh } from './segment-refresh';
import { addMembersSchema, createSegmentSchema, removeMembersSchema, updateSegmentSchema } from './segments.schemas';
import {
  addStaticMembers,
  checkCondition,
  computeMembership,
  createSegment,
  deleteSegment,
  getSegment,
  listSegments,
  refreshCount,
  removeStaticMembers,
  segmentContacts,
  segmentLockKey,
  toSegmentDto,
  updateSegment,
} from './segments.service';

export interface SegmentDeps {
  temporal: TemporalClient;
  hub: ActivityHub;
}

const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

export function segmentRoutes(router: Router, g: Guards, deps: SegmentDeps): void {
  router.post('/segments', g.secret, async (ctx) => {
    const raw = (ctx.request.body ?? {}) as Record<string, unknown>;
    if (typeof raw.name !== 'string' || !raw.name.trim()) throw simpleBadRequest('name is required');
    const input = body(ctx, createSegmentSchema);
    const projectId = ctx.state.project!.id;
    if (input.type === 'DYNAMIC' && !isObject(input.condition)) {
      throw simpleBadRequest('condition is required for a DYNAMIC segment and must be an object');
    }
    const condition = input.type === 'DYNAMIC' ? await checkCondition(ctx.state.em, projectId, input.condition) : null;
    const segment = await ctx.state.em.transactional(async (tx) => {
      const row = await createSegment(tx, projectId, { ...input, condition });
      // Started before the commit: if it fails nothing is written. Its first activity takes the segment's
      // lock, held here until the commit, so it sees the segment (or, after a rollback, none and ends).
      await holdUntilCommit(tx, segmentLockKey(row.id));
      await startSegmentRefresh(deps.temporal, { id: row.id, projectId });
      return row;
    });
    const counted = (await refreshCount(ctx.state.em, segment.id)) ?? segment;
    if (counted.track_membership && counted.type === 'DYNAMIC') {
      const computed = await computeMembership(ctx.state.em, segment.id);
      if (computed?.events.length) deps.hub.publish({ projectId, contactIds: [], events: computed.events });
    }
    ctx.status = 201;
    ctx.body = toSegmentDto((await getSegment(ctx.state.em, projectId, segment.id)) ?? counted);
  });

  router.get('/segments', g.secret, async (ctx) => {
    ctx.body = (await listSegments(ctx.state.em, ctx.state.project!.id)).map(toSegmentDto);
  });

  router.get('/segments/:id', g.secret, async (ctx) => {
    ctx.body = toSegmentDto(await getSegment(ctx.state.em, ctx.state.project!.id, uuidParam(ctx)));
  });

  router.patch('/segments/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    const projectId = ctx.state.project!.id;
    const segment = await getSegment(ctx.state.em, projectId, id);
    const input = body(ctx, updateSegmentSchema);
    let condition;
    if (input.condition !== undefined) {
      if (segment.type === 'STATIC') throw simpleBadRequest('A STATIC segment has no condition; its members are managed with /members');
      if (!isObject(input.condition)) throw simpleBadRequest('condition must be an object');
      condition = await checkCondition(ctx.state.em, projectId, input.condition, id);
    }
    await updateSegment(ctx.state.em, projectId, id, { ...input, condition });
    // A changed definition takes effect at once: the count, and for tracked segments the membership.
    const computed = await computeMembership(ctx.state.em, id);
    if (computed?.events.length) deps.hub.publish({ projectId, contactIds: [], events: computed.events });
    const refreshed = await refreshCount(ctx.state.em, id);
    ctx.body = toSegmentDto(refreshed ?? (await getSegment(ctx.state.em, projectId, id)));
  });

  router.delete('/segments/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    await deleteSegment(ctx.state.em, ctx.state.project!.id, id);
    ctx.body = { id, deleted: true };
  });

  router.get('/segments/:id/contacts', g.secret, async (ctx) => {
    const segment = await getSegment(ctx.state.em, ctx.state.project!.id, uuidParam(ctx));
    const { page, pageSize } = pageParams(ctx);
    const { rows, total } = await segmentContacts(ctx.state.em, segment, page, pageSize);
    ctx.body = { data: rows.map(toContactDto), total, page, pageSize };
  });

  router.post('/segments/:id/members', g.secret, async (ctx) => {
    const projectId = ctx.state.project!.id;
    const segment = await getSegment(ctx.state.em, projectId, uuidParam(ctx));
    if (segment.type !== 'STATIC') throw simpleBadRequest('Members can only be added to a STATIC segment');
    const input = body(ctx, addMembersSchema);
    const out = await addStaticMembers(ctx.state.em, segment, input.emails, input);
    deps.hub.publish({ projectId, contactIds: out.contactIds, events: out.events });
    ctx.body = out.result;
  });

  router.delete('/segments/:id/members', g.secret, async (ctx) => {
    const projectId = ctx.state.project!.id;
    const segment = await getSegment(ctx.state.em, projectId, uuidParam(ctx));
    if (segment.type !== 'STATIC') throw simpleBadRequest('Members can only be removed from a STATIC segment');
    const { emails } = body(ctx, removeMembersSchema);
    const out = await removeStaticMembers(ctx.state.em, segment, emails);
    deps.hub.publish({ projectId, contactIds: out.contactIds, events: out.events });
    ctx.body = out.result;
  });

  router.post('/segments/:id/compute', g.secret, async (ctx) => {
    const projectId = ctx.state.project!.id;
    const segment = await getSegment(ctx.state.em, projectId, uuidParam(ctx));
    const computed = await computeMembership(ctx.state.em, segment.id);
    if (computed?.events.length) deps.hub.publish({ projectId, contactIds: [], events: computed.events });
    const refreshed = segment.track_membership && segment.type === 'DYNAMIC' ? await getSegment(ctx.state.em, projectId, segment.id) : await refreshCount(ctx.state.em, segment.id);
    ctx.body = {
      ...toSegmentDto(refreshed ?? segment),
      computed: { tracked: segment.track_membership, entered: computed?.entered ?? 0, exited: computed?.exited ?? 0 },
    };
  });

  router.post('/segments/:id/refresh', g.secret, async (ctx) => {
    const segment = await getSegment(ctx.state.em, ctx.state.project!.id, uuidParam(ctx));
    ctx.body = toSegmentDto((await refreshCount(ctx.state.em, segment.id)) ?? segment);
  });
}
