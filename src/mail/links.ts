import crypto from 'node:crypto';

export type ContactPage = 'unsubscribe' | 'subscribe' | 'manage';

/**
 * Every link the service puts in mail, under PUBLIC_URL, each carrying an HMAC so it cannot be forged:
 * a click link signs its destination, so it can never be turned into an open redirect.
 */
export class Links {
  /** Its own key, for a delivery thread to make the same links (a KeyObject crosses to a thread as it is). */
  readonly key: crypto.KeyObject;

  constructor(
    readonly publicUrl: string,
    /** The service secret, or a key this class derived from one (`links.key`). */
    secret: string | crypto.KeyObject,
  ) {
    // A key of its own, derived from the service secret, so session tokens and links never share one.
    // A KeyObject, not a Buffer: on Node 24 an HMAC keyed by a Buffer costs many times more.
    this.key = typeof secret === 'string' ? crypto.createSecretKey(crypto.createHmac('sha256', secret).update('postbox links v1').digest()) : secret;
  }

  private sign(message: string): string {
    return crypto.createHmac('sha256', this.key).update(message).digest('base64url').slice(0, 22);
  }

  private verify(message: string, token: string | undefined): boolean {
    if (!token) return false;
    const expected = Buffer.from(this.sign(message));
    const given = Buffer.from(token);
    return given.length === expected.length && crypto.timingSafeEqual(given, expected);
  }

  contactPage(page: ContactPage, contactId: string): string {
    return `${this.publicUrl}/${page}/${contactId}?token=${this.sign(`contact:${contactId}`)}`;
  }

  verifyContact(contactId: string, token: string | undefined): boolean {
    return this.verify(`contact:${contactId}`, token);
  }

  /** The unsubscribe link of a topic's mail: the topic signed together with the contact, so it cannot be swapped. */
  topicUnsubscribe(contactId: string, topicId: string): string {
    return `${this.publicUrl}/unsubscribe/${contactId}?topic=${topicId}&token=${this.sign(`contact:${contactId}:topic:${topicId}`)}`;
  }

  verifyTopicUnsubscribe(contactId: string, topicId: string, token: string | undefined): boolean {
    return this.verify(`contact:${contactId}:topic:${topicId}`, token);
  }

  /** The links a message carries; with a topic, unsubscribing leaves only that topic. */
  contactLinks(contactId: string, topicId?: string | null) {
    return {
      unsubscribeUrl: topicId ? this.topicUnsubscribe(contactId, topicId) : this.contactPage('unsubscribe', contactId),
      subscribeUrl: this.contactPage('subscribe', contactId),
      manageUrl: this.contactPage('manage', contactId),
    };
  }

  /** A double opt-in confirmation's page; the row it names says when it expires and whether it was used. */
  confirmation(confirmationId: string): string {
    return `${this.publicUrl}/confirm/${confirmationId}?token=${this.sign(`confirm:${confirmationId}`)}`;
  }

  verifyConfirmation(confirmationId: string, token: string | undefined): boolean {
    return this.verify(`confirm:${confirmationId}`, token);
  }

  openPixel(emailId: string): string {
    return `${this.publicUrl}/t/o/${emailId}/${this.sign(`open:${emailId}`)}.gif`;
  }

  verifyOpen(emailId: string, token: string): boolean {
    return this.verify(`open:${emailId}`, token);
  }

  click(emailId: string, url: string): string {
    return `${this.publicUrl}/t/c/${emailId}/${this.sign(`click:${emailId}:${url}`)}?u=${encodeURIComponent(url)}`;
  }

  verifyClick(emailId: string, url: string, token: string): boolean {
    return this.verify(`click:${emailId}:${url}`, token);
  }
}
