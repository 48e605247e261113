/** Every workflow the worker runs; the bundle is built from this file at build time. */
export { campaignSendWorkflow } from './campaign-send';
export { contactSnoozeWorkflow } from './contact-snooze';
export { domainVerificationWorkflow } from './domain-verification';
export { emailDispatchWorkflow } from './email-dispatch';
export { maintenanceWorkflow } from './maintenance';
export { segmentRefreshWorkflow } from './segment-refresh';
