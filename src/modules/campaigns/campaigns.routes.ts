import type Router from '@koa/router';
import type { WorkflowStarter } from '../workflow-starter';
import { endpoint } from '../../http/endpoint';
import type { Guards } from '../../http/guards';
import { deletedResponse } from '../../http/responses';
import { uuidPath } from '../../validation';
import type { Links } from '../../mail/links';
import type { ActivityHub } from '../../bus/contact-activity';
import { queueTestSends } from './campaign-test';
import { PREVIEW_DESCRIPTION, previewMessage, previewResponse, previewSchema, sendableBody } from '../templates';
import {
  campaignActionResponse,
  campaignEnvelope,
  campaignListQuery,
  campaignListResponse,
  campaignResponse,
  campaignSchema,
  campaignStatsResponse,
  chooseWinnerSchema,
  sendCampaignSchema,
  testSendResponse,
  testSendSchema,
} from './campaigns.schemas';
import {
  campaignDetail,
  campaignStats,
  cancelCampaign,
  chooseAbWinner,
  createCampaign,
  deleteCampaign,
  duplicateCampaign,
  getCampaign,
  listCampaigns,
  replaceCampaign,
  sendCampaign,
  toCampaignDto,
} from './campaigns.service';

export interface CampaignDeps {
  temporal: WorkflowStarter;
  links: Links;
  hub: ActivityHub;
}

const tag = 'Campaigns';
const params = { id: uuidPath };
const NOT_FOUND = { 404: 'No such campaign in the project' };
const AUDIENCE = {
  400: 'segmentId missing for a SEGMENT audience, or audienceCondition for a FILTERED one (or not valid)',
  403: 'The sender domain is not registered to the project or not verified',
};

export function campaignRoutes(router: Router, g: Guards, deps: CampaignDeps): void {
  router.post(
    '/campaigns',
    g.secret,
    endpoint(
      { tag, summary: 'Create a campaign (DRAFT)', body: campaignSchema, responses: { 201: campaignEnvelope.describe('The new campaign') }, errors: AUDIENCE },
      async (ctx, input) => {
        ctx.status = 201;
        ctx.body = { success: true, data: toCampaignDto(await createCampaign(ctx.state.em, ctx.state.project!.id, input.body())) };
      },
    ),
  );

  router.get(
    '/campaigns',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'List campaigns (offset pagination)',
        query: campaignListQuery,
        responses: { 200: campaignListResponse.describe('A page of campaigns') },
        errors: { 400: 'status is not a campaign status (INVALID_STATUS)' },
      },
      async (ctx, input) => {
        ctx.body = await listCampaigns(ctx.state.em, ctx.state.project!.id, input.query());
      },
    ),
  );

  router.get(
    '/campaigns/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Get a campaign',
        description: 'With each A/B variant’s sent, opened and clicked counts, and a local-time campaign’s zones still waiting.',
        params,
        responses: { 200: campaignResponse.describe('The campaign') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = await campaignDetail(ctx.state.em, await getCampaign(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );

  router.put(
    '/campaigns/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Replace a campaign (DRAFT or SCHEDULED)',
        params,
        body: campaignSchema,
        responses: { 200: campaignResponse.describe('The updated campaign') },
        errors: { ...NOT_FOUND, ...AUDIENCE, 400: `${AUDIENCE[400]}; or the campaign can no longer be changed (CAMPAIGN_NOT_EDITABLE)` },
      },
      async (ctx, input) => {
        const id = input.param('id');
        ctx.body = toCampaignDto(await replaceCampaign(ctx.state.em, ctx.state.project!.id, id, input.body()));
      },
    ),
  );

  router.delete(
    '/campaigns/:id',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Delete a DRAFT campaign',
        params,
        responses: { 200: deletedResponse.describe('Deleted') },
        errors: { ...NOT_FOUND, 400: 'Not a DRAFT (CAMPAIGN_NOT_DELETABLE)', 409: 'SCHEDULED, SENDING or TESTING: cancel it first (CAMPAIGN_ACTIVE)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        await deleteCampaign(ctx.state.em, ctx.state.project!.id, id);
        ctx.body = { id, deleted: true };
      },
    ),
  );

  router.post(
    '/campaigns/:id/duplicate',
    g.secret,
    endpoint(
      { tag, summary: 'Duplicate a campaign as a new DRAFT', params, responses: { 201: campaignEnvelope.describe('The copy') }, errors: NOT_FOUND },
      async (ctx, input) => {
        ctx.status = 201;
        ctx.body = { success: true, data: toCampaignDto(await duplicateCampaign(ctx.state.em, ctx.state.project!.id, input.param('id'))) };
      },
    ),
  );

  /**
   * DRAFT → SENDING (now) or SCHEDULED (later); a SCHEDULED campaign can be moved or sent now. The
   * workflow is started (or signalled) while the campaign row is locked and not yet committed.
   */
  router.post(
    '/campaigns/:id/send',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Send a campaign now, or schedule it',
        description: 'DRAFT becomes SENDING (now) or SCHEDULED (later); a SCHEDULED campaign can be moved or sent now.',
        params,
        body: sendCampaignSchema,
        responses: { 200: campaignActionResponse.describe('The campaign and what happens next') },
        errors: {
          ...NOT_FOUND,
          400: 'scheduledFor is not a date, the campaign is not DRAFT or SCHEDULED (CAMPAIGN_NOT_SENDABLE), or its audience is empty (NO_RECIPIENTS)',
          403: 'The sender domain is not registered to the project or not verified, or the audience would pass a billing cap (BILLING_LIMIT_REACHED)',
        },
      },
      async (ctx, input) => {
        const id = input.param('id');
        const projectId = ctx.state.project!.id;
        const { scheduledFor } = input.body();
        const row = await sendCampaign(ctx.state.em, deps.temporal, projectId, id, scheduledFor);
        ctx.body = {
          success: true,
          data: toCampaignDto(row),
          message: row.status === 'SCHEDULED' ? `Campaign scheduled for ${row.scheduledFor!.toISOString()}` : 'Campaign is being sent',
        };
      },
    ),
  );

  router.post(
    '/campaigns/:id/cancel',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Cancel a SCHEDULED, SENDING or TESTING campaign',
        params,
        responses: { 200: campaignActionResponse.describe('The cancelled campaign') },
        errors: { ...NOT_FOUND, 400: 'The campaign is not SCHEDULED, SENDING or TESTING (CAMPAIGN_NOT_CANCELLABLE)' },
      },
      async (ctx, input) => {
        const id = input.param('id');
        const projectId = ctx.state.project!.id;
        const row = await cancelCampaign(ctx.state.em, deps.temporal, projectId, id);
        ctx.body = { success: true, data: toCampaignDto(row), message: 'Campaign cancelled' };
      },
    ),
  );

  router.post(
    '/campaigns/:id/winner',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Choose the winner of an A/B test',
        description: 'Once, while the campaign is SENDING or TESTING: the rest of the audience gets this variant (the wait ends).',
        params,
        body: chooseWinnerSchema,
        responses: { 200: campaignActionResponse.describe('The campaign with its winner') },
        errors: {
          ...NOT_FOUND,
          400: 'The campaign has no A/B test (CAMPAIGN_NOT_AB_TEST), or is not SENDING or TESTING (CAMPAIGN_NOT_TESTING)',
          409: 'The winner was already chosen or decided (WINNER_ALREADY_CHOSEN)',
        },
      },
      async (ctx, input) => {
        const row = await chooseAbWinner(ctx.state.em, deps.temporal, ctx.state.project!.id, input.param('id'), input.body().variantId);
        ctx.body = { success: true, data: toCampaignDto(row), message: `Variant ${row.abWinnerVariantId} goes to the rest of the audience` };
      },
    ),
  );

  router.post(
    '/campaigns/:id/test',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Send test emails of the campaign to 1-50 addresses',
        description:
          'One message per address, subject marked [Test], rendered for contactId, else for the address’s own contact, else for no data. ' +
          'The campaign stays as it is and its counts do not move. At most 10 requests a minute per project.',
        params,
        body: testSendSchema,
        responses: { 200: testSendResponse.describe('The queued test emails') },
        errors: { 404: 'No such campaign (or contact) in the project', 429: 'Too many test sends this minute (RATE_LIMIT_EXCEEDED)' },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const c = await getCampaign(ctx.state.em, projectId, input.param('id'));
        const body = input.body();
        const queued = await queueTestSends(ctx.state.em, c, { emails: body.emails ?? [body.email!], contactId: body.contactId }, deps.links);
        ctx.body = { success: true, data: { email: queued[0].email, to: queued[0].to, emails: queued } };
      },
    ),
  );

  router.post(
    '/campaigns/:id/preview',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Render the campaign for a contact or for data, sending nothing',
        description: PREVIEW_DESCRIPTION,
        params,
        body: previewSchema,
        responses: { 200: previewResponse.describe('The rendered message') },
        errors: { 404: 'No such campaign (or contact) in the project' },
      },
      async (ctx, input) => {
        const projectId = ctx.state.project!.id;
        const c = await getCampaign(ctx.state.em, projectId, input.param('id'));
        const message = { type: c.type, subject: c.subject, body: sendableBody(c), tracking: c.tracking, topicId: c.topicId };
        ctx.body = await previewMessage(ctx.state.em, projectId, message, input.body(), deps.links);
      },
    ),
  );

  router.get(
    '/campaigns/:id/stats',
    g.secret,
    endpoint(
      {
        tag,
        summary: 'Current send, open, click and bounce counts',
        params,
        responses: { 200: campaignStatsResponse.describe('Counts and rates') },
        errors: NOT_FOUND,
      },
      async (ctx, input) => {
        ctx.body = await campaignStats(ctx.state.em, await getCampaign(ctx.state.em, ctx.state.project!.id, input.param('id')));
      },
    ),
  );
}
