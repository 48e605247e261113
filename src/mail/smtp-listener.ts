import type net from 'node:net';
import type { Logger } from 'pino';
import type { SMTPServer, SMTPServerSession } from 'smtp-server';
import { type ConnectionGate, gateServer, refuseWithLine } from '../net/connection-limits';

/**
 * An SMTP reply that refuses a command: `responseCode` is the reply code, the message starts with its
 * RFC 3463 enhanced status code (`550`, `5.7.1 The sender domain ...`).
 */
export class SmtpReply extends Error {
  constructor(
    readonly responseCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** smtp-server takes a refusal as an Error carrying `responseCode`. */
export const asError = (reply: SmtpReply) => Object.assign(new Error(reply.message), { responseCode: reply.responseCode });

/** A handler's refusal as it is; anything else is a fault of ours, answered as temporary so the client sends again. */
export function replyFor(err: unknown, log: Logger, what: string): SmtpReply {
  if (err instanceof SmtpReply) return err;
  log.error({ err }, `${what} failed`);
  return new SmtpReply(451, '4.3.0 Temporary failure; nothing was accepted, send the message again');
}

/**
 * Listens with the gate in front (connections past its limits get `421` and are closed before the
 * session starts); answers the port.
 */
export async function listenSmtp(server: SMTPServer, host: string, port: number, gate: ConnectionGate, log: Logger, name: string): Promise<number> {
  server.on('error', (err) => log.warn({ err }, `${name} connection error`));
  gateServer(server.server as net.Server, gate, refuseWithLine('421 4.7.0 Too many connections; try again later'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return ((server.server as net.Server).address() as net.AddressInfo).port;
}

export const closeSmtp = (servers: SMTPServer[]) => Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));

/**
 * A deadline per session, from `start` (at connect, or again at a later step) until `clear`: a session
 * still short of the step that clears it (AUTH, DATA, the end of a message) is answered `421` and closed
 * then, however busy it keeps itself. `start` again replaces the session's running deadline.
 */
export class SessionDeadlines {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly servers: () => SMTPServer[],
    private readonly seconds: number,
    private readonly reply: string,
  ) {}

  start(session: SMTPServerSession): void {
    this.clear(session);
    const timer = setTimeout(() => {
      this.timers.delete(session.id);
      for (const connection of this.servers().flatMap((s) => [...s.connections])) {
        const c = connection as unknown as { session: SMTPServerSession; send(code: number, text: string): void; close(): void };
        if (c.session !== session) continue;
        c.send(421, this.reply);
        c.close();
      }
    }, this.seconds * 1000);
    timer.unref();
    this.timers.set(session.id, timer);
  }

  clear(session: SMTPServerSession): void {
    clearTimeout(this.timers.get(session.id));
    this.timers.delete(session.id);
  }
}
