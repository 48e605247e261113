/** The emails module's public surface: the only file other modules import. */
export { Email, EmailAttachmentSchema, EmailSchema } from './emails.entity';
export type { EmailStatus } from './emails.entity';
export { MAX_RECIPIENTS } from './emails.schemas';
export { recordEmailActivity } from './email-activity';
export type { EmailActivity, RecordedActivity, SuppressionRules } from './email-activity';
export { sendingContext } from './sending-context';
export { SendBatcher, sendEmails } from './emails.service';
export { EMAIL_QUEUED_CHANNEL, queueEmail, suppressedError } from './emails.queries';
export type { EmailType, LocalEmailQueue, SendLimits } from './emails.service';
export { SmtpSubmission } from './smtp-submission.service';
export { emailRoutes } from './emails.routes';
export { trackingRoutes } from './tracking.routes';
