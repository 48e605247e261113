/**
 * Where the service's work is queued and how its executions are named and found.
 * Workflow ids derive from the business entity, so a second start for the same entity is refused
 * (or joined) by Temporal itself rather than by our own bookkeeping.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** The default task queue; TEMPORAL_TASK_QUEUE overrides it. */
export const DEFAULT_TASK_QUEUE = 'postbox';

/** Where campaign chunks are delivered: a queue each worker polls with a bounded number of slots. */
export const campaignChunkQueue = (taskQueue: string) => `${taskQueue}.campaign-chunks`;

export const workflowIds = {
  contactSnooze: (contactId: string) => `contact-snooze:${contactId}`,
  campaignSend: (campaignId: string) => `campaign-send:${campaignId}`,
  automation: (executionId: string) => `automation:${executionId}`,
  domainVerification: (domainId: string) => `domain-verification:${domainId}`,
  bulkJob: (jobId: string) => `bulk-job:${jobId}`,
  contactImport: (jobId: string) => `contact-import:${jobId}`,
  suppressionImport: (jobId: string) => `suppression-import:${jobId}`,
  accountEmail: (id: string) => `account-email:${id}`,
  maintenance: () => 'maintenance',
  activityCounts: () => 'activity-counts',
  /** A worker's own email dispatchers, named for its own task queue. */
  emailDispatch: (workerQueue: string, shard: number) => `email-dispatch:${workerQueue}:${shard}`,
  segment: (segmentId: string) => `segment:${segmentId}`,
  automationDispatch: (shard: number) => `automation-dispatch:${shard}`,
  webhookDispatch: (shard: number) => `webhook-dispatch:${shard}`,
};

/** Keyword search attributes every execution carries, so an operator finds a project's work in the Web UI. */
export const searchAttributes = {
  ProjectId: defineSearchAttributeKey('ProjectId', SearchAttributeType.KEYWORD),
  ContactId: defineSearchAttributeKey('ContactId', SearchAttributeType.KEYWORD),
  CampaignId: defineSearchAttributeKey('CampaignId', SearchAttributeType.KEYWORD),
  ExecutionId: defineSearchAttributeKey('ExecutionId', SearchAttributeType.KEYWORD),
  DomainId: defineSearchAttributeKey('DomainId', SearchAttributeType.KEYWORD),
  SegmentId: defineSearchAttributeKey('SegmentId', SearchAttributeType.KEYWORD),
  JobId: defineSearchAttributeKey('JobId', SearchAttributeType.KEYWORD),
};
