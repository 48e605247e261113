/**
 * The one client layer for the service's workflows: every start, signal, update and cancel a module
 * asks for, typed by the workflow function or its signal/update definition. It implements the
 * modules' `WorkflowStarter` port, so modules never import Temporal or workflow code.
 */
import { type Client, WorkflowUpdateFailedError } from '@temporalio/client';
import type { WorkflowStarter } from '../src/modules/workflow-starter';
import { searchAttributes, workflowIds } from './workflow-ids';
import { accountEmailWorkflow } from './workflows/account-email.workflow';
import { automationEventSignal, automationWorkflow } from './workflows/automation.workflow';
import { bulkJobWorkflow } from './workflows/bulk-job.workflow';
import { abWinnerChosenSignal, campaignSendWorkflow, rescheduleUpdate } from './workflows/campaign-send.workflow';
import { contactImportWorkflow } from './workflows/contact-import.workflow';
import { contactSnoozeWorkflow, snoozeUntilSignal } from './workflows/contact-snooze.workflow';
import { domainVerificationWorkflow } from './workflows/domain-verification.workflow';
import { segmentRefreshWorkflow } from './workflows/segment-refresh.workflow';
import { suppressionImportWorkflow } from './workflows/suppression-import.workflow';
import { newId } from '../src/db/ids';

type Key = (typeof searchAttributes)[keyof typeof searchAttributes];
const attributes = (projectId: string, ...more: Array<[Key, string]>) => [
  { key: searchAttributes.ProjectId, value: projectId },
  ...more.map(([key, value]) => ({ key, value })),
];

export function workflowStarter(client: Client, taskQueue: string): WorkflowStarter {
  const wf = client.workflow;
  type JobWorkflow = typeof bulkJobWorkflow | typeof contactImportWorkflow | typeof suppressionImportWorkflow;
  const jobStart = async (workflow: JobWorkflow, workflowId: string, job: { id: string; projectId: string }) => {
    await wf.start(workflow, {
      workflowId,
      taskQueue,
      args: [{ jobId: job.id }],
      typedSearchAttributes: attributes(job.projectId, [searchAttributes.JobId, job.id]),
    });
  };
  return {
    async startSegmentRefresh(s) {
      await wf.start(segmentRefreshWorkflow, {
        workflowId: workflowIds.segment(s.id),
        taskQueue,
        args: [{ segmentId: s.id }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: attributes(s.projectId, [searchAttributes.SegmentId, s.id]),
      });
    },

    async startDomainVerification(d) {
      await wf.start(domainVerificationWorkflow, {
        workflowId: workflowIds.domainVerification(d.id),
        taskQueue,
        args: [{ domainId: d.id }],
        typedSearchAttributes: attributes(d.projectId, [searchAttributes.DomainId, d.id]),
      });
    },

    async stopDomainVerification(domainId) {
      await wf
        .getHandle(workflowIds.domainVerification(domainId))
        .cancel()
        .catch(() => {});
    },

    async scheduleSnoozeEnd(c) {
      const until = c.until.toISOString();
      await wf.signalWithStart(contactSnoozeWorkflow, {
        workflowId: workflowIds.contactSnooze(c.id),
        taskQueue,
        args: [{ contactId: c.id, until }],
        signal: snoozeUntilSignal,
        signalArgs: [until],
        typedSearchAttributes: attributes(c.projectId, [searchAttributes.ContactId, c.id]),
      });
    },

    startBulkJob: (job) => jobStart(bulkJobWorkflow, workflowIds.bulkJob(job.id), job),
    startContactImport: (job) => jobStart(contactImportWorkflow, workflowIds.contactImport(job.id), job),
    startSuppressionImport: (job) => jobStart(suppressionImportWorkflow, workflowIds.suppressionImport(job.id), job),

    async queueAccountEmail(email) {
      await wf.start(accountEmailWorkflow, { workflowId: workflowIds.accountEmail(newId()), taskQueue, args: [email] });
    },

    async startCampaignWorkflow(c) {
      await wf.start(campaignSendWorkflow, {
        workflowId: workflowIds.campaignSend(c.id),
        taskQueue,
        args: [{ campaignId: c.id, scheduledFor: c.scheduledFor?.toISOString() ?? null }],
        typedSearchAttributes: attributes(c.projectId, [searchAttributes.CampaignId, c.id]),
      });
    },

    async rescheduleCampaignWorkflow(campaignId, at) {
      try {
        await wf.getHandle(workflowIds.campaignSend(campaignId)).executeUpdate(rescheduleUpdate, { args: [at?.toISOString() ?? null] });
        return null;
      } catch (err) {
        if (err instanceof WorkflowUpdateFailedError) return { refused: err.cause?.message ?? err.message };
        throw err;
      }
    },

    async cancelCampaignWorkflow(campaignId) {
      await wf.getHandle(workflowIds.campaignSend(campaignId)).cancel();
    },

    async signalAbWinner(campaignId) {
      await wf.getHandle(workflowIds.campaignSend(campaignId)).signal(abWinnerChosenSignal);
    },

    async startAutomationExecution(x) {
      await wf.start(automationWorkflow, {
        workflowId: workflowIds.automation(x.id),
        taskQueue,
        args: [{ executionId: x.id }],
        workflowIdConflictPolicy: 'USE_EXISTING',
        typedSearchAttributes: attributes(x.projectId, [searchAttributes.ExecutionId, x.id], [searchAttributes.ContactId, x.contactId]),
      });
    },

    async cancelAutomationExecution(executionId) {
      await wf
        .getHandle(workflowIds.automation(executionId))
        .cancel()
        .catch(() => {});
    },

    async signalAutomationEvent(executionId, event) {
      try {
        await wf.getHandle(workflowIds.automation(executionId)).signal(automationEventSignal, event);
        return true;
      } catch (err) {
        if ((err as Error).name === 'WorkflowNotFoundError') return false;
        throw err;
      }
    },

    async cancelProjectWorkflows(projectId) {
      let cancelled = 0;
      for await (const run of wf.list({ query: `ProjectId = "${projectId}" AND ExecutionStatus = "Running"` })) {
        await wf
          .getHandle(run.workflowId, run.runId)
          .cancel()
          .then(() => cancelled++)
          .catch(() => {}); // ended meanwhile
      }
      return cancelled;
    },
  };
}
