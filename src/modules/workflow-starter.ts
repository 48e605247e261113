import type { AccountEmail } from './accounts';

/** The business entity a workflow runs for; its ids become the execution's search attributes. */
export interface Owned {
  id: string;
  projectId: string;
}

/** An event that wakes an automation execution waiting for it. */
export interface AutomationEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
}

/**
 * The port through which modules start, signal and cancel the service's workflows. Modules declare
 * it; `temporal/starts.ts` implements it (the one Temporal client layer) and `main.ts` hands it in,
 * so no module imports Temporal or workflow code, and the activities that import modules make no cycle.
 */
export interface WorkflowStarter {
  /** `segment:<segmentId>` keeps the segment's count (and tracked membership) fresh until it is deleted; joined if running. */
  startSegmentRefresh(segment: Owned): Promise<void>;
  /** `domain-verification:<domainId>`: the background checks of a new domain. */
  startDomainVerification(domain: Owned): Promise<void>;
  /** Stops the checks of a deleted domain now; were this to fail, the next check finds no domain and ends. */
  stopDomainVerification(domainId: string): Promise<void>;
  /** `contact-snooze:<contactId>`, or the wake-up time of the one already running moved to `until`. */
  scheduleSnoozeEnd(contact: Owned & { until: Date }): Promise<void>;
  /** `bulk-job:<jobId>`: runs a queued bulk job. */
  startBulkJob(job: Owned): Promise<void>;
  /** `contact-import:<jobId>`: runs a queued contact import. */
  startContactImport(job: Owned): Promise<void>;
  /** `suppression-import:<jobId>`: runs a queued suppression import. */
  startSuppressionImport(job: Owned): Promise<void>;
  /** `account-email:<new id>`: a verification, reset or invitation mail, retried until SMTP accepts it. */
  queueAccountEmail(email: AccountEmail): Promise<void>;
  /** `campaign-send:<campaignId>`; it sleeps until `scheduledFor` when there is one. */
  startCampaignWorkflow(campaign: Owned & { scheduledFor: Date | null }): Promise<void>;
  /** Moves a scheduled campaign's send time (null: now); answers why the send refused it (sending has begun), or null. */
  rescheduleCampaignWorkflow(campaignId: string, at: Date | null): Promise<{ refused: string } | null>;
  cancelCampaignWorkflow(campaignId: string): Promise<void>;
  /** Tells the send an A/B test's winner was chosen (it reads which from the campaign's row). */
  signalAbWinner(campaignId: string): Promise<void>;
  /** `automation:<executionId>` for a recorded execution; joined if running. */
  startAutomationExecution(execution: Owned & { contactId: string }): Promise<void>;
  /** Cancels an execution's run; one that has ended already is no error. */
  cancelAutomationExecution(executionId: string): Promise<void>;
  /** Wakes a waiting execution with the event; false when its run has ended. */
  signalAutomationEvent(executionId: string, event: AutomationEvent): Promise<boolean>;
  /** Cancels every running workflow of the project (found by its ProjectId search attribute); answers how many. */
  cancelProjectWorkflows(projectId: string): Promise<number>;
}
