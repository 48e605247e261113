/** Every workflow the worker runs; the bundle is built from this file at build time. */
export { accountEmailWorkflow } from './account-email.workflow';
export { automationWorkflow } from './automation.workflow';
export { automationDispatchWorkflow } from './automation-dispatch.workflow';
export { bulkJobWorkflow } from './bulk-job.workflow';
export { campaignSendWorkflow } from './campaign-send.workflow';
export { contactImportWorkflow } from './contact-import.workflow';
export { suppressionImportWorkflow } from './suppression-import.workflow';
export { contactSnoozeWorkflow } from './contact-snooze.workflow';
export { domainVerificationWorkflow } from './domain-verification.workflow';
export { emailDispatchWorkflow } from './email-dispatch.workflow';
export { maintenancePurgeWorkflow } from './maintenance.workflow';
export { activityCountsFoldWorkflow } from './activity-counts.workflow';
export { segmentRefreshWorkflow } from './segment-refresh.workflow';
export { webhookDispatchWorkflow } from './webhook-dispatch.workflow';
