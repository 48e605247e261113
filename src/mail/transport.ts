import { createTransport } from 'nodemailer';
import type { SendMailOptions } from 'nodemailer/lib/mailer';

export type DeliveryOutcome =
  | { kind: 'sent'; response: string; providerMessageId: string | null }
  /** The server answered 4xx for this message: try again later. */
  | { kind: 'retry'; error: string }
  /** The server answered 5xx: it will never take this message. */
  | { kind: 'failed'; error: string }
  /** No conversation was possible (refused, timed out, TLS or auth failure): every message waits. */
  | { kind: 'unreachable'; error: string };

// Amazon SES answers `250 Ok <message id>` (hex groups joined by dashes); its notifications carry that id.
const SES_ID = /^250 Ok ([0-9a-f]+(?:-[0-9a-f]+){4,})\s*$/i;

/** The pooled SMTP transport of one process (SMTP_URL, or the dev mailbox's capture server). */
export class Mailer {
  private readonly transport: ReturnType<typeof createTransport>;

  constructor(smtpUrl: string, opts: { maxConnections?: number } = {}) {
    const url = new URL(smtpUrl);
    this.transport = createTransport({
      pool: true,
      host: url.hostname,
      port: Number(url.port || (url.protocol === 'smtps:' ? 465 : 587)),
      secure: url.protocol === 'smtps:',
      auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
      maxConnections: opts.maxConnections ?? 8,
      maxMessages: Infinity,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 60_000,
    });
  }

  async send(message: SendMailOptions): Promise<DeliveryOutcome> {
    try {
      const info = await this.transport.sendMail(message);
      return { kind: 'sent', response: info.response, providerMessageId: SES_ID.exec(info.response)?.[1] ?? null };
    } catch (err) {
      return classify(err);
    }
  }

  close(): void {
    this.transport.close();
  }
}

export function classify(err: unknown): DeliveryOutcome {
  const e = err as { responseCode?: number; response?: string; code?: string; message?: string };
  const error = e.response ?? e.message ?? String(err);
  const code = e.responseCode;
  // Refused during the conversation with a reply code: that message's own fate.
  if (code && code >= 500 && code < 600 && e.code !== 'EAUTH') return { kind: 'failed', error };
  if (code && code >= 400 && code < 500 && (e.code === 'EENVELOPE' || e.code === 'EMESSAGE')) return { kind: 'retry', error };
  // 421 and the like, auth failures, connection errors: the server, not the message.
  return { kind: 'unreachable', error };
}
