/** Every workflow the worker runs; the bundle is built from this file at build time. */
export { accountEmailWorkflow } from './account-email';
export { automationWorkflow } from './automation';
export { automationDispatchWorkflow } from './automation-dispatch';
export { bulkJobWorkflow } from './bulk-job';
export { campaignSendWorkflow } from './campaign-send';
export { contactImportWorkflow } from './contact-import';
export { suppressionImportWorkflow } from './suppression-import';
export { contactSnoozeWorkflow } from './contact-snooze';
export { domainVerificationWorkflow } from './domain-verification';
export { emailDispatchWorkflow } from './email-dispatch';
export { maintenancePurgeWorkflow } from './maintenance';
export { activityCountsFoldWorkflow } from './activity-counts';
export { segmentRefreshWorkflow } from './segment-refresh';
export { webhookDispatchWorkflow } from './webhook-dispatch';
