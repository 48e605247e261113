/** The emails module's public surface: the only file other modules import. */
export { EmailDispatcher } from './dispatch';
export type { CampaignChunk } from './dispatch';
export { recordEmailActivity } from './email-activity';
export type { EmailActivity, RecordedActivity, SuppressionRules } from './email-activity';
export { emailRoutes } from './emails.routes';
export { MAX_RECIPIENTS } from './emails.schemas';
export { EMAIL_QUEUED_CHANNEL, SendBatcher, queueEmail } from './emails.service';
export type { LocalEmailQueue } from './emails.service';
export { sendingContext } from './sending-context';
export { SmtpSubmission } from './smtp-submission.service';
export { trackingRoutes } from './tracking.routes';
