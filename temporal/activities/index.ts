import type { MikroORM } from '@mikro-orm/postgresql';
import { Context } from '@temporalio/activity';
import type { Logger } from 'pino';
import { purgeExpiredIdempotencyKeys } from '../../src/http/idempotency';
import { purgeRateLimitWindows } from '../../src/http/rate-limit';
import type { Resolver } from '../../src/dns/resolver';
import { endSnooze } from '../../src/modules/contacts/contacts.service';
import { checkDomain } from '../../src/modules/domains/domains.service';
import type { EmailDispatcher } from '../../src/modules/emails/dispatch';
import type { ActivityHub } from '../../src/modules/events/contact-activity';
import { computeMembership, refreshCount } from '../../src/modules/segments/segments.service';
import { sql } from '../../src/db/orm';

export interface ActivityDeps {
  orm: MikroORM;
  log: Logger;
  resolver: Resolver;
  dispatcher: EmailDispatcher;
  hub: ActivityHub;
  idempotencyTtlHours: number;
  domainCheckIntervalSeconds: number;
  segmentRefreshSeconds: number;
}

/** Thin adapters from workflows to services. Each one is safe to run twice. */
export function createActivities(deps: ActivityDeps) {
  return {
    /** Resubscribes the contact if it still carries exactly this snooze; otherwise does nothing. */
    async endContactSnooze(input: { contactId: string; until: string }): Promise<{ resubscribed: boolean }> {
      const ended = await endSnooze(deps.orm.em.fork(), input.contactId, new Date(input.until));
      if (ended) deps.hub.publish({ projectId: ended.projectId, contactIds: [input.contactId], events: ended.events });
      return { resubscribed: !!ended?.events.length };
    },

    /** Checks a sender domain's DNS records and stores the outcome; `exists: false` once it was deleted. */
    async checkDomain(input: { domainId: string }): Promise<{ exists: boolean; status?: string; intervalSeconds: number }> {
      const row = await checkDomain(deps.orm.em.fork(), deps.resolver, input.domainId);
      return { exists: !!row, status: row?.status, intervalSeconds: deps.domainCheckIntervalSeconds };
    },

    /** Delivers queued email for up to `seconds`; fails (to be retried) while SMTP is unreachable. */
    async drainEmailQueue(input: { seconds: number }) {
      const ctx = Context.current();
      return deps.dispatcher.drain({
        until: Date.now() + input.seconds * 1000,
        heartbeat: () => ctx.heartbeat(),
        signal: ctx.cancellationSignal,
      });
    },

    /** Recomputes a tracked segment's membership (with its events) or refreshes a segment's count. */
    async refreshSegment(input: { segmentId: string }): Promise<{ exists: boolean; intervalSeconds: number }> {
      const em = deps.orm.em.fork();
      const computed = await computeMembership(em, input.segmentId);
      if (!computed) return { exists: false, intervalSeconds: deps.segmentRefreshSeconds };
      const [segment] = await sql<{ project_id: string; track_membership: boolean; type: string }>(
        em,
        `SELECT project_id, track_membership, type FROM segments WHERE id = ?`,
        [input.segmentId],
      );
      if (!segment) return { exists: false, intervalSeconds: deps.segmentRefreshSeconds };
      if (!(segment.type === 'DYNAMIC' && segment.track_membership)) await refreshCount(em, input.segmentId);
      if (computed.events.length) deps.hub.publish({ projectId: segment.project_id, contactIds: [], events: computed.events });
      return { exists: true, intervalSeconds: deps.segmentRefreshSeconds };
    },

    async purgeExpired(): Promise<{ idempotencyKeys: number; rateLimitWindows: number }> {
      const em = deps.orm.em.fork();
      return {
        idempotencyKeys: await purgeExpiredIdempotencyKeys(em, deps.idempotencyTtlHours),
        rateLimitWindows: await purgeRateLimitWindows(em),
      };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
