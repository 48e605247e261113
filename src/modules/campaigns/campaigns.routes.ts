import { assertWithinBillingLimits } from '../billing/billing.service';
import type Router from '@koa/router';
import type { TemporalClient } from '../../../temporal/client';
import { sql } from '../../db/orm';
import { badRequest } from '../../http/errors';
import type { Guards } from '../../http/guards';
import { pageParams, sortParams } from '../../http/pagination';
import { body, queryValue, uuidParam } from '../../http/validate';
import type { Links } from '../../mail/links';
import { assertVerifiedSender } from '../domains/domains.service';
import type { ActivityHub } from '../events/contact-activity';
import { queueTestSend } from './campaign-test';
import { cancelCampaignWorkflow, rescheduleCampaignWorkflow, startCampaignWorkflow } from './campaign-send';
import { CAMPAIGN_STATUSES, type CampaignStatus, campaignSchema, sendCampaignSchema, testSendSchema } from './campaigns.schemas';
import {
  audienceSize,
  campaignStats,
  type CampaignRow,
  createCampaign,
  deleteCampaign,
  duplicateCampaign,
  getCampaign,
  listCampaigns,
  parseSchedule,
  replaceCampaign,
  toCampaignDto,
} from './campaigns.service';

export interface CampaignDeps {
  temporal: TemporalClient;
  links: Links;
  hub: ActivityHub;
}

const SORTS = { name: 'name', createdAt: 'created_at', updatedAt: 'updated_at' } as const;

export function campaignRoutes(router: Router, g: Guards, deps: CampaignDeps): void {
  router.post('/campaigns', g.secret, async (ctx) => {
    const input = body(ctx, campaignSchema);
    ctx.status = 201;
    ctx.body = { success: true, data: toCampaignDto(await createCampaign(ctx.state.em, ctx.state.project!.id, input)) };
  });

  router.get('/campaigns', g.secret, async (ctx) => {
    const status = queryValue(ctx, 'status') || undefined;
    if (status && !(CAMPAIGN_STATUSES as readonly string[]).includes(status)) {
      throw badRequest(`status must be one of ${CAMPAIGN_STATUSES.join(', ')}`, 'INVALID_STATUS');
    }
    ctx.body = await listCampaigns(ctx.state.em, ctx.state.project!.id, {
      ...pageParams(ctx),
      ...sortParams(ctx, SORTS, 'createdAt'),
      status: status as CampaignStatus | undefined,
      search: queryValue(ctx, 'search')?.trim() || undefined,
    });
  });

  router.get('/campaigns/:id', g.secret, async (ctx) => {
    ctx.body = toCampaignDto(await getCampaign(ctx.state.em, ctx.state.project!.id, uuidParam(ctx)));
  });

  router.put('/campaigns/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    ctx.body = toCampaignDto(await replaceCampaign(ctx.state.em, ctx.state.project!.id, id, body(ctx, campaignSchema)));
  });

  router.delete('/campaigns/:id', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    await deleteCampaign(ctx.state.em, ctx.state.project!.id, id);
    ctx.body = { id, deleted: true };
  });

  router.post('/campaigns/:id/duplicate', g.secret, async (ctx) => {
    ctx.status = 201;
    ctx.body = { success: true, data: toCampaignDto(await duplicateCampaign(ctx.state.em, ctx.state.project!.id, uuidParam(ctx))) };
  });

  /**
   * DRAFT → SENDING (now) or SCHEDULED (later); a SCHEDULED campaign can be moved or sent now. The
   * workflow is started (or signalled) while the campaign row is locked and not yet committed.
   */
  router.post('/campaigns/:id/send', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    const projectId = ctx.state.project!.id;
    const { scheduledFor } = body(ctx, sendCampaignSchema);
    const row = await ctx.state.em.transactional(async (tx) => {
      const c = await getCampaign(tx, projectId, id, true);
      if (c.status !== 'DRAFT' && c.status !== 'SCHEDULED') {
        throw badRequest(`A ${c.status} campaign cannot be sent; only DRAFT or SCHEDULED campaigns can`, 'CAMPAIGN_NOT_SENDABLE');
      }
      const at = parseSchedule(scheduledFor);
      await assertVerifiedSender(tx, projectId, c.from_email);
      const recipients = await audienceSize(tx, c);
      if (recipients === 0) throw badRequest('The campaign’s audience has no subscribed contacts', 'NO_RECIPIENTS');
      await assertWithinBillingLimits(tx, projectId, recipients);
      const [updated] = await sql<CampaignRow>(
        tx,
        `UPDATE campaigns SET status = ?, scheduled_for = ?, updated_at = now() WHERE id = ? RETURNING *`,
        [at ? 'SCHEDULED' : 'SENDING', at ?? null, id],
      );
      if (c.status === 'DRAFT') await startCampaignWorkflow(deps.temporal, { id, projectId, scheduledFor: at ?? null });
      else await rescheduleCampaignWorkflow(deps.temporal, id, at ?? null);
      return updated;
    });
    ctx.body = {
      success: true,
      data: toCampaignDto(row),
      message: row.status === 'SCHEDULED' ? `Campaign scheduled for ${new Date(row.scheduled_for!).toISOString()}` : 'Campaign is being sent',
    };
  });

  router.post('/campaigns/:id/cancel', g.secret, async (ctx) => {
    const id = uuidParam(ctx);
    const projectId = ctx.state.project!.id;
    const row = await ctx.state.em.transactional(async (tx) => {
      const c = await getCampaign(tx, projectId, id, true);
      if (c.status !== 'SCHEDULED' && c.status !== 'SENDING') throw badRequest(`A ${c.status} campaign cannot be cancelled`, 'CAMPAIGN_NOT_CANCELLABLE');
      const [updated] = await sql<CampaignRow>(tx, `UPDATE campaigns SET status = 'CANCELLED', updated_at = now() WHERE id = ? RETURNING *`, [id]);
      await cancelCampaignWorkflow(deps.temporal, id);
      return updated;
    });
    ctx.body = { success: true, data: toCampaignDto(row), message: 'Campaign cancelled' };
  });

  router.post('/campaigns/:id/test', g.secret, async (ctx) => {
    const projectId = ctx.state.project!.id;
    const c = await getCampaign(ctx.state.em, projectId, uuidParam(ctx));
    const { email } = body(ctx, testSendSchema);
    const queued = await queueTestSend(ctx.state.em, c, email, deps.links);
    deps.hub.publish({ projectId, contactIds: [queued.contactId], events: queued.events });
    ctx.body = { success: true, data: { email: queued.emailId, to: email } };
  });

  router.get('/campaigns/:id/stats', g.secret, async (ctx) => {
    ctx.body = await campaignStats(ctx.state.em, await getCampaign(ctx.state.em, ctx.state.project!.id, uuidParam(ctx)));
  });
}
