import net from 'node:net';
import { SMTPServer } from 'smtp-server';
import { simpleParser, type ParsedMail } from 'mailparser';

export interface Received {
  envelope: { from: string | null; to: string[] };
  raw: Buffer;
  parsed: ParsedMail;
}

export type Reply = 'accept' | { code: number; message: string };

/** The sender of the service's own account mail in tests (every signup mails a verification link). */
export const ACCOUNT_MAIL_SENDER = 'accounts@postbox.test';

/**
 * A real SMTP listener (the smtp-server package) for tests: keeps what it receives, can refuse
 * messages with any reply, and can be stopped and started again on the same port (an outage).
 */
export class SmtpSink {
  readonly received: Received[] = [];
  /** Decides the reply to each message; accepts everything by default. */
  reply: (rcpt: string[]) => Reply = () => 'accept';
  /** Decides the reply to each MAIL FROM (a relay refusing the envelope sender); accepts every sender by default. */
  mailFromReply: (from: string) => Reply = () => 'accept';
  /** Decides the reply to each RCPT TO (a receiving MX refusing one recipient); accepts every recipient by default. */
  rcptReply: (rcpt: string) => Reply = () => 'accept';
  /** The text after `250` when accepting; SES answers `Ok <message id>`. */
  acceptText: () => string = () => 'Accepted';
  port = 0;
  /** Milliseconds to wait before answering each message (a slow server). */
  delayMs = 0;
  /** Parse each message (tests read them); benchmarks only count. */
  parse = true;
  /**
   * Envelope senders whose mail is accepted but not kept: by default the service's account mail
   * (the verification link every signup sends), which the tests of a project's own mail ignore.
   */
  ignoreSenders = new Set([ACCOUNT_MAIL_SENDER]);
  private server?: SMTPServer;

  get url(): string {
    return `smtp://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    const server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      size: 64 * 1024 * 1024,
      onMailFrom: (address, _session, callback) => {
        const decision = this.mailFromReply(address.address);
        if (decision === 'accept') return callback();
        callback(Object.assign(new Error(decision.message), { responseCode: decision.code }));
      },
      onRcptTo: (address, _session, callback) => {
        const decision = this.rcptReply(address.address);
        if (decision === 'accept') return callback();
        callback(Object.assign(new Error(decision.message), { responseCode: decision.code }));
      },
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', async () => {
          const to = session.envelope.rcptTo.map((r) => r.address);
          if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
          const decision = this.reply(to);
          if (decision !== 'accept') {
            return callback(Object.assign(new Error(decision.message), { responseCode: decision.code }));
          }
          const raw = Buffer.concat(chunks);
          if (session.envelope.mailFrom && this.ignoreSenders.has(session.envelope.mailFrom.address)) return callback(null, this.acceptText());
          this.received.push({
            envelope: { from: session.envelope.mailFrom ? session.envelope.mailFrom.address : null, to },
            raw,
            parsed: this.parse ? await simpleParser(raw) : (undefined as never),
          });
          callback(null, this.acceptText());
        });
      },
    });
    // smtp-server reports a client that vanished mid-message (ECONNRESET: the crash tests kill the sender
    // on purpose) as a server error; like a real server, the sink drops that message and goes on.
    server.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (server.server.address() as net.AddressInfo).port;
    this.server = server;
    return this;
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    // Drop open connections too, as a crashed server would.
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Ends every open session from the server's side, as a server whose idle timeout ran out would. */
  dropSessions(): void {
    for (const connection of (this.server as unknown as { connections: Set<{ close(): void }> } | undefined)?.connections ?? []) connection.close();
  }

  /** Waits until `n` messages were received in all. */
  async waitFor(n: number, ms = 30_000): Promise<Received[]> {
    const deadline = Date.now() + ms;
    while (this.received.length < n) {
      if (Date.now() > deadline) throw new Error(`expected ${n} messages, got ${this.received.length}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return this.received;
  }
}
