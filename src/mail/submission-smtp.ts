import fs from 'node:fs';
import type net from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { isLoopback } from '../http/loopback';
import { ADDRESS_SHAPE } from './mime';

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

/** What the listener asks of the service; `S` is what a successful AUTH stands for (the project). */
export interface SubmissionHandler<S> {
  /** The password of AUTH: a project's secret key. Throws SmtpReply 535 when it is not one. */
  authenticate(password: string): Promise<S>;
  /** MAIL FROM: the project still sends, within its rate limit, from a verified domain (null: `<>`). */
  mailFrom(user: S, address: string | null): Promise<void>;
  /** After DATA: the message accepted and committed, one email id per envelope recipient. */
  submit(user: S, envelope: { from: string | null; to: string[] }, raw: Buffer): Promise<string[]>;
}

export interface SubmissionOptions {
  host: string;
  /** 0 is "off" in the settings; this listener is started only for a real port. */
  port: number;
  /** Implicit TLS (the port-465 style); needs `tls`. */
  tlsPort?: number;
  /** PEM files: STARTTLS on `port`, and the listener on `tlsPort`. Re-read when they change. */
  tls?: { certFile: string; keyFile: string };
  /** How often the certificate files are looked at for a renewal. */
  tlsPollMs?: number;
  allowInsecureAuth: boolean;
  maxBytes: number;
  maxRecipients: number;
  idleSeconds: number;
  /** Failed AUTHs a client address may make in `authFailureWindowMs` before AUTH is refused outright. */
  authFailuresAllowed?: number;
  authFailureWindowMs?: number;
  log: Logger;
}

export interface SubmissionListener {
  port: number;
  tlsPort?: number;
  close(): Promise<void>;
}

/** Failed AUTHs per client address in a fixed window: past the allowance, AUTH answers 454 until the window ends. */
class AuthFailures {
  private readonly byAddress = new Map<string, { since: number; count: number }>();

  constructor(
    private readonly allowed: number,
    private readonly windowMs: number,
  ) {}

  blocked(address: string): boolean {
    const entry = this.byAddress.get(address);
    if (!entry) return false;
    if (Date.now() - entry.since > this.windowMs) {
      this.byAddress.delete(address);
      return false;
    }
    return entry.count >= this.allowed;
  }

  failed(address: string): void {
    if (this.byAddress.size > 10_000) {
      for (const [a, e] of this.byAddress) if (Date.now() - e.since > this.windowMs) this.byAddress.delete(a);
    }
    const entry = this.byAddress.get(address);
    if (entry && Date.now() - entry.since <= this.windowMs) entry.count++;
    else this.byAddress.set(address, { since: Date.now(), count: 1 });
  }
}

function readPair(files: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  const pair = { cert: fs.readFileSync(files.certFile), key: fs.readFileSync(files.keyFile) };
  // Throws on a mismatched or broken pair, so a half-written renewal never replaces a working one.
  tls.createSecureContext(pair);
  return pair;
}

const asError = (reply: SmtpReply) => Object.assign(new Error(reply.message), { responseCode: reply.responseCode });

/**
 * SMTP submission (RFC 6409) on `smtp-server`: AUTH PLAIN/LOGIN required, with a project's secret key
 * as the password; STARTTLS and implicit TLS when certificates are given; the message handed to the
 * handler whole, and `250` given only once the handler has committed it.
 */
export async function startSubmissionSmtp<S>(opts: SubmissionOptions, handler: SubmissionHandler<S>): Promise<SubmissionListener> {
  const failures = new AuthFailures(opts.authFailuresAllowed ?? 10, opts.authFailureWindowMs ?? 10 * 60_000);
  const users = new WeakMap<SMTPServerSession, S>();
  let pair = opts.tls ? readPair(opts.tls) : undefined;

  const options = (secure: boolean): SMTPServerOptions => ({
    secure,
    ...(pair ?? {}),
    banner: 'postbox SMTP submission',
    authMethods: ['PLAIN', 'LOGIN'],
    // Decided per connection in onAuth: loopback and encrypted connections may authenticate.
    allowInsecureAuth: true,
    disabledCommands: pair ? [] : ['STARTTLS'],
    size: opts.maxBytes,
    socketTimeout: opts.idleSeconds * 1000,
    closeTimeout: 5_000,
    logger: false,
    onAuth(auth, session, callback) {
      const address = session.remoteAddress;
      if (failures.blocked(address)) {
        return callback(asError(new SmtpReply(454, '4.7.0 Too many failed authentication attempts from this address; try again later')));
      }
      if (!session.secure && !isLoopback(address) && !opts.allowInsecureAuth) {
        return callback(asError(new SmtpReply(538, '5.7.11 Encryption required: use STARTTLS (or the implicit TLS port) before AUTH')));
      }
      handler.authenticate(auth.password ?? '').then(
        (user) => {
          users.set(session, user);
          callback(null, { user: auth.username || 'key' });
        },
        (err) => {
          if (err instanceof SmtpReply && err.responseCode === 535) failures.failed(address);
          callback(asError(replyFor(err, opts.log)));
        },
      );
    },
    onMailFrom(from, session, callback) {
      const address = from.address ? from.address.toLowerCase() : null;
      handler.mailFrom(users.get(session)!, address).then(
        () => callback(),
        (err) => callback(asError(replyFor(err, opts.log))),
      );
    },
    onRcptTo(to, session, callback) {
      if (session.envelope.rcptTo.length >= opts.maxRecipients) {
        return callback(asError(new SmtpReply(452, `4.5.3 Too many recipients: at most ${opts.maxRecipients} per message; send the rest in another message`)));
      }
      if (!ADDRESS_SHAPE.test(to.address)) return callback(asError(new SmtpReply(553, `5.1.3 ${to.address} is not an email address`)));
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => {
        if (!stream.sizeExceeded) chunks.push(c);
      });
      stream.on('end', () => {
        if (stream.sizeExceeded) {
          return callback(asError(new SmtpReply(552, `5.3.4 Message too big: the limit is ${opts.maxBytes} bytes`)));
        }
        const envelope = {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address.toLowerCase() || null : null,
          to: [...new Set(session.envelope.rcptTo.map((r) => r.address.toLowerCase()))],
        };
        handler.submit(users.get(session)!, envelope, Buffer.concat(chunks)).then(
          (ids) => callback(null, `2.0.0 OK ${ids.join(' ')}`),
          (err) => callback(asError(replyFor(err, opts.log))),
        );
      });
    },
  });

  const servers: SMTPServer[] = [];
  const listenOn = async (secure: boolean, port: number): Promise<number> => {
    const server = new SMTPServer(options(secure));
    server.on('error', (err) => opts.log.warn({ err }, 'SMTP submission connection error'));
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, opts.host, () => resolve());
    });
    return ((server.server as net.Server).address() as net.AddressInfo).port;
  };

  const closeAll = () => Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  try {
    const port = await listenOn(false, opts.port);
    const tlsPort = pair && opts.tlsPort !== undefined ? await listenOn(true, opts.tlsPort) : undefined;
    if (opts.tls) {
      const files = opts.tls;
      // Renewals (certbot, cert-manager) replace the files: new connections get the new pair, no restart.
      const reload = () => {
        try {
          pair = readPair(files);
          for (const s of servers) s.updateSecureContext(pair);
          opts.log.info({ cert: files.certFile }, 'SMTP submission certificate reloaded');
        } catch (err) {
          opts.log.error({ err, cert: files.certFile }, 'SMTP submission certificate could not be reloaded; the previous one stays in use');
        }
      };
      const interval = opts.tlsPollMs ?? 30_000;
      fs.watchFile(files.certFile, { interval, persistent: false }, reload);
      fs.watchFile(files.keyFile, { interval, persistent: false }, reload);
    }
    return {
      port,
      tlsPort,
      close: async () => {
        if (opts.tls) {
          fs.unwatchFile(opts.tls.certFile);
          fs.unwatchFile(opts.tls.keyFile);
        }
        await closeAll();
      },
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}

/** A handler's refusal as it is; anything else is a fault of ours, answered as temporary so the client sends again. */
function replyFor(err: unknown, log: Logger): SmtpReply {
  if (err instanceof SmtpReply) return err;
  log.error({ err }, 'SMTP submission failed');
  return new SmtpReply(451, '4.3.0 Temporary failure; nothing was accepted, send the message again');
}
