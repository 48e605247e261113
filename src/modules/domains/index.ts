/** The domains module's public surface: the only file other modules import. */
export { type Domain, DomainSchema } from './domains.entity';
export { returnPathVerified } from './domain-records';
export type { ReturnPathDns } from './domain-records';
export { assertVerifiedSender, checkDomain, refuseUnverifiedSender, senderDomainOf } from './domains.service';
export { domainRoutes } from './domains.routes';
