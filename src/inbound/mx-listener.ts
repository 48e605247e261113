import type { Logger } from 'pino';
import { SMTPServer } from 'smtp-server';
import { asError, closeSmtp, listenSmtp, replyFor, SessionDeadlines, SmtpReply } from '../mail/smtp-listener';
import type { ConnectionGate } from '../net/connection-limits';

/** What the MX asks of the service. */
export interface MxHandler {
  /** RCPT: whether mail to this address is ours to take (a return path, a feedback-loop address, an inbound host's). */
  accepts(address: string): boolean | Promise<boolean>;
  /** After DATA: the message handled and committed; a throw is our fault (451, the sender tries again). */
  receive(envelope: { from: string | null; to: string[] }, raw: Buffer): Promise<void>;
}

export interface MxOptions {
  host: string;
  /** 0 is "off" in the settings; the listener is started only for a real port. */
  port: number;
  maxBytes: number;
  /** A connection must reach DATA this long after connecting. */
  timeoutSeconds: number;
  gate: ConnectionGate;
  reverseDns?: boolean;
  log: Logger;
}

export interface MxListener {
  port: number;
  close(): Promise<void>;
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
  const deadlines = new SessionDeadlines(() => servers, opts.timeoutSeconds, `4.4.2 No message within ${opts.timeoutSeconds} s; closing`);
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
      deadlines.start(session);
      callback();
    },
    onClose(session) {
      deadlines.clear(session);
    },
    onRcptTo(to, session, callback) {
      if (session.envelope.rcptTo.length >= MAX_RECIPIENTS) {
        return callback(asError(new SmtpReply(452, `4.5.3 Too many recipients: at most ${MAX_RECIPIENTS} per message`)));
      }
      // Asked of the database for an inbound host (is its domain verified?): a failure there is ours, 451.
      Promise.resolve()
        .then(() => handler.accepts(to.address))
        .then(
          (ok) =>
            callback(
              ok
                ? undefined
                : asError(new SmtpReply(550, `5.1.1 <${to.address}>: no such mailbox; this server takes only replies and reports for postbox's senders`)),
            ),
          (err) => callback(asError(replyFor(err, opts.log, 'inbound MX recipient check'))),
        );
    },
    onData(stream, session, callback) {
      deadlines.clear(session);
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => {
        if (!stream.sizeExceeded) chunks.push(c);
      });
      stream.on('end', () => {
        if (stream.sizeExceeded) return callback(asError(new SmtpReply(552, `5.3.4 Message too big: the limit is ${opts.maxBytes} bytes`)));
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address.toLowerCase() || null : null,
          to: [...new Set(session.envelope.rcptTo.map((r) => r.address.toLowerCase()))],
        };
        handler.receive(envelope, Buffer.concat(chunks)).then(
          () => callback(null, '2.0.0 OK'),
          (err) => callback(asError(replyFor(err, opts.log, 'inbound MX'))),
        );
      });
    },
  });
  servers.push(server);
  try {
    const port = await listenSmtp(server, opts.host, opts.port, opts.gate, opts.log, 'inbound MX');
    return { port, close: async () => void (await closeSmtp(servers)) };
  } catch (err) {
    await closeSmtp(servers);
    throw err;
  }
}
