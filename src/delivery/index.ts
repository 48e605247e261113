/** The way out: what other rooms use of delivery. See README.md here for one message's path through it. */
export { DeliveryThreads, InProcessSender } from './delivery-threads';
export type { MessageSender } from './delivery-threads';
export { DeliveryEngine } from './delivery-engine';
export type { DeliveryPorts } from './delivery-ports';
export type { DrainClaimant } from './hand-over';
export { retryDelaySeconds } from './outcome-recorder';
export { CLAIM_SECONDS, SmtpUnavailableError } from './queued-email';
export type { CampaignChunk, DrainReport, QueuedEmail } from './queued-email';
