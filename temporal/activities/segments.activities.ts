import { computeMembership, refreshCount, SegmentSchema } from '../../src/modules/segments';
import type { ActivityDeps } from './deps';

export function segmentActivities(deps: ActivityDeps) {
  return {
    /** Recomputes a tracked segment's membership (with its events) or refreshes a segment's count. */
    async refreshSegment(input: { segmentId: string }): Promise<{ exists: boolean; intervalSeconds: number }> {
      const em = deps.orm.em.fork();
      const computed = await computeMembership(em, input.segmentId);
      if (!computed) return { exists: false, intervalSeconds: deps.segmentRefreshSeconds };
      const segment = await em.findOne(SegmentSchema, input.segmentId, { fields: ['projectId', 'trackMembership', 'type'], refresh: true });
      if (!segment) return { exists: false, intervalSeconds: deps.segmentRefreshSeconds };
      if (!(segment.type === 'DYNAMIC' && segment.trackMembership)) await refreshCount(em, input.segmentId);
      if (computed.events.length) deps.hub.publish({ projectId: segment.projectId, contactIds: [], events: computed.events });
      return { exists: true, intervalSeconds: deps.segmentRefreshSeconds };
    },
  };
}
