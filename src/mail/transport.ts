import { Readable } from 'node:stream';
import { createTransport } from 'nodemailer';
import type { SendMailOptions } from 'nodemailer/lib/mailer';
import SMTPConnection from 'nodemailer/lib/smtp-connection';

export type DeliveryOutcome =
  | { kind: 'sent'; response: string; providerMessageId: string | null }
  /** The server answered 4xx for this message: try again later. */
  | { kind: 'retry'; error: string }
  /** The server answered 5xx: it will never take this message. `step` is the command it refused, when known. */
  | { kind: 'failed'; error: string; step?: SmtpStep }
  /** No conversation was possible (refused, timed out, TLS or auth failure): every message waits. */
  | { kind: 'unreachable'; error: string };

// Amazon SES answers `250 Ok <message id>` (hex groups joined by dashes); its notifications carry that id.
const SES_ID = /^250 Ok ([0-9a-f]+(?:-[0-9a-f]+){4,})\s*$/i;

const sent = (response: string): DeliveryOutcome => ({ kind: 'sent', response, providerMessageId: SES_ID.exec(response)?.[1] ?? null });

/** SMTP_URL as nodemailer's connection options: smtps: is TLS from the start, smtp: upgrades with STARTTLS when offered. */
function connectionOptions(smtpUrl: string) {
  const url = new URL(smtpUrl);
  return {
    host: url.hostname,
    port: Number(url.port || (url.protocol === 'smtps:' ? 465 : 587)),
    secure: url.protocol === 'smtps:',
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 60_000,
  };
}

/** nodemailer's pooled transport, composing the message itself: for the service's own account mail. */
export class Mailer {
  private readonly transport: ReturnType<typeof createTransport>;

  constructor(smtpUrl: string, opts: { maxConnections?: number } = {}) {
    this.transport = createTransport({ ...connectionOptions(smtpUrl), pool: true, maxConnections: opts.maxConnections ?? 8, maxMessages: Infinity });
  }

  async send(message: SendMailOptions): Promise<DeliveryOutcome> {
    try {
      return sent((await this.transport.sendMail(message)).response);
    } catch (err) {
      return classify(err);
    }
  }

  close(): void {
    this.transport.close();
  }
}

interface Session {
  connection: SMTPConnection;
  /** Messages it carried: a session that carried one may have been closed by the server since. */
  carried: number;
  closed: boolean;
}

type SmtpError = Error & { responseCode?: number; response?: string; code?: string; command?: string };

/** The SMTP command a refusal answered: a refused MAIL FROM is about the sender, not the recipient. */
export type SmtpStep = 'MAIL' | 'RCPT' | 'DATA';
const STEPS: Record<string, SmtpStep> = { 'MAIL FROM': 'MAIL', 'RCPT TO': 'RCPT', DATA: 'DATA' };

/**
 * Up to `maxConnections` SMTP sessions (nodemailer's SMTPConnection), each carrying one ready message
 * at a time; a message waits for a free session. Mail that is already encoded and signed needs none of
 * the mailer around nodemailer's pool, which costs several times more CPU per message than this
 * (`npm run bench:parts`).
 */
export class SmtpSessions {
  private readonly options: ReturnType<typeof connectionOptions>;
  private readonly idle: Session[] = [];
  /** Sessions open or opening. */
  private open = 0;
  /** Senders waiting for a session: handed one that is free, or null to open their own. */
  private readonly waiting: Array<(s: Session | null) => void> = [];
  private closing = false;

  constructor(
    smtpUrl: string,
    private readonly maxConnections: number,
  ) {
    this.options = connectionOptions(smtpUrl);
  }

  async send(envelope: { from: string; to: string[] }, raw: Buffer): Promise<DeliveryOutcome> {
    for (;;) {
      let session: Session;
      try {
        session = await this.session();
      } catch (err) {
        return classify(err);
      }
      const reused = session.carried > 0;
      // A stream, so a failure can tell whether any of the message left.
      const body = Readable.from([raw], { objectMode: false });
      try {
        const info = await new Promise<{ response: string }>((resolve, reject) =>
          session.connection.send({ from: envelope.from, to: [...envelope.to] }, body, (err, result) => (err ? reject(err) : resolve(result!))),
        );
        session.carried++;
        // The connection finishes its own bookkeeping of the reply after this callback.
        setImmediate(() => this.release(session));
        return sent(info.response);
      } catch (err) {
        const e = err as SmtpError;
        if ((e.code === 'EENVELOPE' || e.code === 'EMESSAGE') && e.responseCode && e.responseCode !== 421 && !session.closed) {
          // The server refused this message; the session is fine once reset.
          session.connection.reset((resetErr) => (resetErr ? this.drop(session) : this.release(session)));
          return classify(err);
        }
        this.drop(session);
        // A reused session the server had closed (or was closing: 421), before a byte of the message left:
        // it goes out on a new one.
        if (reused && (!e.responseCode || e.responseCode === 421) && !body.readableDidRead) continue;
        return classify(err);
      }
    }
  }

  private async session(): Promise<Session> {
    for (;;) {
      const free = this.idle.pop();
      if (free) return free;
      if (this.open < this.maxConnections) return this.connect();
      const handed = await new Promise<Session | null>((resolve) => this.waiting.push(resolve));
      if (handed) return handed;
    }
  }

  private async connect(): Promise<Session> {
    this.open++;
    const connection = new SMTPConnection(this.options);
    const session: Session = { connection, carried: 0, closed: false };
    // An idle session the server ends (its timeout, a restart) leaves the pool.
    connection.on('error', () => this.drop(session));
    connection.on('end', () => this.drop(session));
    try {
      // A failed connection says so by its 'error' event alone, not through connect's callback.
      await new Promise<void>((resolve, reject) => {
        connection.once('error', reject);
        connection.once('end', () => reject(new Error('the SMTP server closed the connection')));
        connection.connect((err) => (err ? reject(err) : resolve()));
      });
      if (this.options.auth) await new Promise<void>((resolve, reject) => connection.login(this.options.auth, (err) => (err ? reject(err) : resolve())));
      return session;
    } catch (err) {
      this.drop(session);
      throw err;
    }
  }

  private release(session: Session): void {
    if (session.closed) return;
    if (this.closing) return this.drop(session, true);
    const next = this.waiting.shift();
    if (next) next(session);
    else this.idle.push(session);
  }

  private drop(session: Session, quit = false): void {
    if (session.closed) return;
    session.closed = true;
    this.open--;
    const i = this.idle.indexOf(session);
    if (i >= 0) this.idle.splice(i, 1);
    if (quit) session.connection.quit();
    else session.connection.close();
    // Someone waiting may now open a session of their own.
    this.waiting.shift()?.(null);
  }

  close(): void {
    this.closing = true;
    for (const session of [...this.idle]) this.drop(session, true);
  }
}

export function classify(err: unknown): DeliveryOutcome {
  const e = err as SmtpError;
  const error = e.response ?? e.message ?? String(err);
  const code = e.responseCode;
  // Refused during the conversation with a reply code: that message's own fate.
  if (code && code >= 500 && code < 600 && e.code !== 'EAUTH') {
    const step = e.command ? STEPS[e.command] : undefined;
    return step ? { kind: 'failed', error, step } : { kind: 'failed', error };
  }
  if (code && code >= 400 && code < 500 && (e.code === 'EENVELOPE' || e.code === 'EMESSAGE')) return { kind: 'retry', error };
  // 421 and the like, auth failures, connection errors: the server, not the message.
  return { kind: 'unreachable', error };
}
