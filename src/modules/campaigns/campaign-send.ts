import type { TemporalClient } from '../../../temporal/client';
import { searchAttributes, workflowIds } from '../../../temporal/workflow-ids';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { badRequest } from '../../errors';
import { abWinnerChosenSignal, campaignSendWorkflow, rescheduleUpdate } from '../../../temporal/workflows/campaign-send';

/** Starts `campaign-send:<campaignId>`; it sleeps until `scheduledFor` when there is one. */
export async function startCampaignWorkflow(t: TemporalClient, c: { id: string; projectId: string; scheduledFor: Date | null }): Promise<void> {
  await t.client.workflow.start(campaignSendWorkflow, {
    workflowId: workflowIds.campaignSend(c.id),
    taskQueue: t.taskQueue,
    args: [{ campaignId: c.id, scheduledFor: c.scheduledFor?.toISOString() ?? null }],
    typedSearchAttributes: [
      { key: searchAttributes.ProjectId, value: c.projectId },
      { key: searchAttributes.CampaignId, value: c.id },
    ],
  });
}

/**
 * Moves a scheduled campaign's send time (null: now) through the workflow's `reschedule` update,
 * which refuses once sending has begun (the time came while this request waited for the row).
 */
export async function rescheduleCampaignWorkflow(t: TemporalClient, campaignId: string, at: Date | null): Promise<void> {
  try {
    await t.client.workflow.getHandle(workflowIds.campaignSend(campaignId)).executeUpdate(rescheduleUpdate, { args: [at?.toISOString() ?? null] });
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError)
      throw badRequest(`The campaign cannot be moved: ${err.cause?.message ?? err.message}`, 'CAMPAIGN_NOT_SENDABLE');
    throw err;
  }
}

export async function cancelCampaignWorkflow(t: TemporalClient, campaignId: string): Promise<void> {
  await t.client.workflow.getHandle(workflowIds.campaignSend(campaignId)).cancel();
}

/** Tells the workflow an A/B test's winner was chosen (it reads which from the campaign's row). */
export async function signalAbWinner(t: TemporalClient, campaignId: string): Promise<void> {
  await t.client.workflow.getHandle(workflowIds.campaignSend(campaignId)).signal(abWinnerChosenSignal);
}
