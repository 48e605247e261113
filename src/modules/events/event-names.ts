/** Names the service emits itself; clients cannot track them. */
export const SYSTEM_EVENTS = {
  contactSubscribed: 'contact.subscribed',
  contactUnsubscribed: 'contact.unsubscribed',
} as const;

export const SEGMENT_MEMBERSHIP = /^segment\.[^.]+\.(entry|exit)$/;

export function isReservedEventName(name: string): boolean {
  return name.startsWith('email.') || name === SYSTEM_EVENTS.contactSubscribed || name === SYSTEM_EVENTS.contactUnsubscribed || SEGMENT_MEMBERSHIP.test(name);
}
