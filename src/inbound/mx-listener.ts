import type { Logger } from 'pino';
import { SMTPServer } from 'smtp-server';
import { asError, closeSmtp, listenSmtp, replyFor, SessionDeadlines, SmtpReply } from '../mail/smtp-listener';
import { clientPrefix } from '../net/client-prefix';
import type { ConnectionGate } from '../net/connection-limits';

/** What the MX asks of the service. */
export interface MxHandler {
  /** RCPT: whether mail to this address is ours to take (a return path, a feedback-loop address, an inbound host's). */
  accepts(address: string): boolean | Promise<boolean>;
  /** After DATA: the message handled and committed; a throw is our fault (451, the sender tries again). */
  receive(envelope: MxEnvelope, raw: Buffer): Promise<void>;
}

/** A message's envelope, and the client that handed it over (its address and what it said in EHLO). */
export interface MxEnvelope {
  from: string | null;
  to: string[];
  client: { address: string; helo: string };
}

export interface MxOptions {
  host: string;
  /** 0 is "off" in the settings; the listener is started only for a real port. */
  port: number;
  maxBytes: number;
  /** A connection must reach DATA this long after connecting or after its previous message; also the idle limit. */
  timeoutSeconds: number;
  /** A message's DATA must end this long after it began. */
  dataTimeoutSeconds: number;
  /** A connection is closed this long after it connected, whatever it is doing. */
  sessionTimeoutSeconds: number;
  /** Messages one connection may send; the next MAIL FROM is answered 421 and the connection closed. */
  maxMessagesPerSession: number;
  /** Message bytes all connections together may hold at once; a message that would pass it is 452 (sent again later). */
  bufferBytes: number;
  /** Messages one client (an IPv4 address, an IPv6 /64) may send an hour, counted in this process; then MAIL FROM is 450. */
  reportsPerClientPerHour: number;
  gate: ConnectionGate;
  reverseDns?: boolean;
  log: Logger;
}

export interface MxListener {
  port: number;
  /** Message bytes held now, of every connection (bounded by `bufferBytes`). */
  readonly buffered: number;
  close(): Promise<void>;
}

/**
 * Messages per client in the current clock hour, in this process: what one client can make the MX
 * store is bounded. The whole count starts again each hour, so it holds only this hour's clients.
 */
class HourlyCount {
  private hour = -1;
  private readonly counts = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** Counts one for this client; false when it is past the limit this hour. */
  take(address: string): boolean {
    const hour = Math.floor(Date.now() / 3_600_000);
    if (hour !== this.hour) {
      this.hour = hour;
      this.counts.clear();
    }
    const key = clientPrefix(address);
    const n = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, n);
    return n <= this.limit;
  }
}

/** Reports name one envelope recipient (the return path); a few more are allowed, never a mailing list's worth. */
const MAX_RECIPIENTS = 10;

/**
 * The MX of the return-path hosts: takes bounces, delay notices, auto-replies and complaints addressed
 * to a return path or to the feedback-loop address, and nothing else (550 5.1.1 at RCPT, so it is never
 * a relay). No AUTH and no TLS: MTAs deliver reports anonymously. 250 is given only once the handler
 * has committed what the report means.
 */
export async function startMxListener(opts: MxOptions, handler: MxHandler): Promise<MxListener> {
  const servers: SMTPServer[] = [];
  // Each phase has its deadline: reaching DATA (from connect, and again after each message), DATA itself,
  // and the whole session. An idle connection is closed by smtp-server's socket timeout.
  const envelopes = new SessionDeadlines(() => servers, opts.timeoutSeconds, `4.4.2 No message within ${opts.timeoutSeconds} s; closing`);
  const data = new SessionDeadlines(() => servers, opts.dataTimeoutSeconds, `4.4.2 DATA not finished within ${opts.dataTimeoutSeconds} s; closing`);
  const sessions = new SessionDeadlines(() => servers, opts.sessionTimeoutSeconds, `4.4.2 Session longer than ${opts.sessionTimeoutSeconds} s; closing`);
  let buffered = 0;
  const perClient = new HourlyCount(opts.reportsPerClientPerHour);
  const server = new SMTPServer({
    banner: 'postbox MX for bounces and feedback reports',
    authOptional: true,
    disabledCommands: ['AUTH', 'STARTTLS'],
    disableReverseLookup: !opts.reverseDns,
    size: opts.maxBytes,
    socketTimeout: opts.timeoutSeconds * 1000,
    closeTimeout: 5_000,
    logger: false,
    onConnect(session, callback) {
      envelopes.start(session);
      sessions.start(session);
      callback();
    },
    onClose(session) {
      for (const d of [envelopes, data, sessions]) d.clear(session);
    },
    onMailFrom(_from, session, callback) {
      // `transaction` counts this one: 1 for the first message.
      if (session.transaction > opts.maxMessagesPerSession) {
        return callback(asError(new SmtpReply(421, `4.7.0 At most ${opts.maxMessagesPerSession} messages per connection; closing`)));
      }
      if (!perClient.take(session.remoteAddress)) {
        return callback(asError(new SmtpReply(450, `4.7.1 At most ${opts.reportsPerClientPerHour} messages an hour from one address; try again later`)));
      }
      callback();
    },
    onRcptTo(to, session, callback) {
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) {
        return callback(asError(new SmtpReply(452, `4.5.3 Too many recipients: at most ${MAX_RECIPIENTS} per message`)));
      }
      const noSuchMailbox = `5.1.1 <${to.address}>: no such mailbox; this server takes only replies and reports for postbox's senders`;
      Promise.resolve(handler.accepts(to.address)).then(
        (ours) => callback(ours ? undefined : asError(new SmtpReply(550, noSuchMailbox))),
        (err) => callback(asError(replyFor(err, opts.log, 'inbound MX'))),
      );
    },
    onData(stream, session, callback) {
      envelopes.clear(session);
      data.start(session);
      // What this message holds of the shared budget; given back once the handler is done with it.
      let held = 0;
      let overBudget = false;
      const chunks: Buffer[] = [];
      const release = () => {
        buffered -= held;
        held = 0;
        chunks.length = 0;
      };
      stream.on('data', (c: Buffer) => {
        if (stream.sizeExceeded || overBudget) return;
        if (buffered + c.length > opts.bufferBytes) {
          overBudget = true;
          return release();
        }
        chunks.push(c);
        held += c.length;
        buffered += c.length;
      });
      stream.on('end', () => {
        data.clear(session);
        envelopes.start(session);
        const done = (err: Error | null, message?: string) => {
          release();
          callback(err, message);
        };
        if (stream.sizeExceeded) return done(asError(new SmtpReply(552, `5.3.4 Message too big: the limit is ${opts.maxBytes} bytes`)));
        if (overBudget) return done(asError(new SmtpReply(452, '4.3.1 Too many messages in progress; send it again later')));
        const envelope: MxEnvelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address.toLowerCase() || null : null,
          to: [...new Set(session.envelope.rcptTo.map((r) => r.address.toLowerCase()))],
          client: { address: session.remoteAddress, helo: session.hostNameAppearsAs ?? '' },
        };
        const raw = Buffer.concat(chunks);
        chunks.length = 0;
        handler.receive(envelope, raw).then(
          () => done(null, '2.0.0 OK'),
          (err) => done(asError(replyFor(err, opts.log, 'inbound MX'))),
        );
      });
    },
  });
  servers.push(server);
  try {
    const port = await listenSmtp(server, opts.host, opts.port, opts.gate, opts.log, 'inbound MX');
    return {
      port,
      get buffered() {
        return buffered;
      },
      close: async () => void (await closeSmtp(servers)),
    };
  } catch (err) {
    await closeSmtp(servers);
    throw err;
  }
}
