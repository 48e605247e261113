/** The inbound-emails module's public surface: the only file other modules import. */
export { InboundEmail, InboundEmailSchema } from './inbound-emails.entity';
export type { ReceivedAttachment, ReceivedHeader } from './inbound-emails.entity';
export { INBOUND_HOST_LABEL, inboundHostDomain, projectsReceivingAt, purgeInboundEmails, recordInboundEmail } from './inbound-emails.service';
export type { ParsedReceived, RecordedInbound } from './inbound-emails.service';
export { inboundEmailRoutes } from './inbound-emails.routes';
