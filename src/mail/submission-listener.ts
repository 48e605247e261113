import fs from 'node:fs';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { SMTPServer, type SMTPServerOptions, type SMTPServerSession } from 'smtp-server';
import { isLoopback } from '../net/loopback';
import type { ConnectionGate } from '../net/connection-limits';
import { ADDRESS_SHAPE } from './mime';
import { asError, closeSmtp, listenSmtp, replyFor as replyOf, SessionDeadlines, SmtpReply } from './smtp-listener';

export { SmtpReply } from './smtp-listener';

const replyFor = (err: unknown, log: Logger) => replyOf(err, log, 'SMTP submission');

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
  /** A connection that has not authenticated this long after connecting is closed with 421. */
  authTimeoutSeconds: number;
  /** Connections held at once, in total and per client address (past either: 421 and closed). */
  gate: ConnectionGate;
  /** Look clients up in reverse DNS (a PTR query per connection); off, a client is named by its address. */
  reverseDns?: boolean;
  /** AUTH attempts (failed, or still being checked) a non-loopback address may make in `authFailureWindowMs`. */
  authFailuresAllowed?: number;
  authFailureWindowMs?: number;
  /** A failed AUTH is answered after this long, which bounds how fast any one connection can guess. */
  authFailureDelayMs?: number;
  log: Logger;
}

/** A listener on a non-loopback address that would take keys in clear text: refused unless insecure AUTH is allowed. */
export class InsecureSubmissionError extends Error {}

export interface SubmissionListener {
  port: number;
  tlsPort?: number;
  close(): Promise<void>;
}

/**
 * AUTH attempts per client address. A non-loopback address may have `allowed` attempts failed or still
 * in progress in a fixed window; past that AUTH answers 454 without looking the key up, until the
 * window ends. Loopback is every local application's address, so it is never locked out: there each
 * failure is only answered late (as everywhere), and guessing is bounded by the listener's connections
 * per client, each waiting out its failure delay.
 */
class AuthAttempts {
  private readonly byAddress = new Map<string, { since: number; failed: number; pending: number }>();

  constructor(
    private readonly allowed: number,
    private readonly windowMs: number,
  ) {}

  private entry(address: string) {
    const now = Date.now();
    let entry = this.byAddress.get(address);
    if (entry && now - entry.since > this.windowMs) {
      entry.since = now;
      entry.failed = 0;
    }
    if (!entry) {
      if (this.byAddress.size > 10_000) {
        for (const [a, e] of this.byAddress) if (e.pending === 0 && now - e.since > this.windowMs) this.byAddress.delete(a);
      }
      entry = { since: now, failed: 0, pending: 0 };
      this.byAddress.set(address, entry);
    }
    return entry;
  }

  /** Starts an attempt; false when the address has no attempts left (then nothing is started). */
  begin(address: string): boolean {
    const entry = this.entry(address);
    if (!isLoopback(address) && entry.failed + entry.pending >= this.allowed) return false;
    entry.pending++;
    return true;
  }

  end(address: string, failed: boolean): void {
    const entry = this.entry(address);
    entry.pending = Math.max(0, entry.pending - 1);
    if (failed) entry.failed++;
  }
}

function readPair(files: { certFile: string; keyFile: string }): { cert: Buffer; key: Buffer } {
  const pair = { cert: fs.readFileSync(files.certFile), key: fs.readFileSync(files.keyFile) };
  // Throws on a mismatched or broken pair, so a half-written renewal never replaces a working one.
  tls.createSecureContext(pair);
  return pair;
}

/**
 * SMTP submission (RFC 6409) on `smtp-server`: AUTH PLAIN/LOGIN required, with a project's secret key
 * as the password; STARTTLS and implicit TLS when certificates are given; the message handed to the
 * handler whole, and `250` given only once the handler has committed it.
 */
export async function startSubmissionListener<S>(opts: SubmissionOptions, handler: SubmissionHandler<S>): Promise<SubmissionListener> {
  if (!opts.tls && !opts.allowInsecureAuth && !isLoopback(opts.host)) {
    throw new InsecureSubmissionError(
      `SMTP submission on ${opts.host} would take secret keys in clear text from other machines: set SMTP_SUBMISSION_TLS_CERT and ` +
        'SMTP_SUBMISSION_TLS_KEY, or SMTP_SUBMISSION_ALLOW_INSECURE_AUTH=true on a private network, or bind it to 127.0.0.1',
    );
  }
  const attempts = new AuthAttempts(opts.authFailuresAllowed ?? 10, opts.authFailureWindowMs ?? 10 * 60_000);
  const failureDelayMs = opts.authFailureDelayMs ?? 1000;
  const users = new WeakMap<SMTPServerSession, S>();
  const servers: SMTPServer[] = [];
  const authDeadlines = new SessionDeadlines(() => servers, opts.authTimeoutSeconds, `4.7.0 No authentication within ${opts.authTimeoutSeconds} s; closing`);
  let pair = opts.tls ? readPair(opts.tls) : undefined;
  const serverDisabled = () => (pair ? [] : ['STARTTLS']);
  /** AUTH is offered on loopback, over TLS, or anywhere when insecure AUTH is allowed; elsewhere only after STARTTLS. */
  const mayAuthenticate = (session: SMTPServerSession) => session.secure || isLoopback(session.remoteAddress) || opts.allowInsecureAuth;
  const requireAuth = (session: SMTPServerSession, callback: (err?: Error | null) => void): boolean => {
    if (users.has(session)) return true;
    const how = mayAuthenticate(session) ? 'AUTH' : 'STARTTLS, then AUTH';
    callback(asError(new SmtpReply(530, `5.7.0 Authentication required: ${how} with a project's secret key`)));
    return false;
  };

  const options = (secure: boolean): SMTPServerOptions => ({
    secure,
    ...(pair ?? {}),
    banner: 'postbox SMTP submission',
    authMethods: ['PLAIN', 'LOGIN'],
    // Decided per session: AUTH is not even advertised where it may not be used (onConnect).
    allowInsecureAuth: true,
    disabledCommands: serverDisabled(),
    disableReverseLookup: !opts.reverseDns,
    size: opts.maxBytes,
    socketTimeout: opts.idleSeconds * 1000,
    closeTimeout: 5_000,
    logger: false,
    onConnect(session, callback) {
      if (!mayAuthenticate(session)) session.disabledCommands = ['AUTH', ...serverDisabled()];
      // Unauthenticated connections are closed after authTimeoutSeconds, however busy they keep themselves.
      authDeadlines.start(session);
      callback();
    },
    onSecure(_socket, session, callback) {
      // After STARTTLS the session may authenticate: AUTH is advertised from the next EHLO on.
      session.disabledCommands = undefined;
      callback();
    },
    onClose(session) {
      authDeadlines.clear(session);
    },
    onAuth(auth, session, callback) {
      const address = session.remoteAddress;
      if (!mayAuthenticate(session)) {
        return callback(asError(new SmtpReply(538, '5.7.11 Encryption required: use STARTTLS (or the implicit TLS port) before AUTH')));
      }
      if (!attempts.begin(address)) {
        return callback(asError(new SmtpReply(454, '4.7.0 Too many failed authentication attempts from this address; try again later')));
      }
      handler.authenticate(auth.password ?? '').then(
        (user) => {
          attempts.end(address, false);
          users.set(session, user);
          authDeadlines.clear(session);
          callback(null, { user: auth.username || 'key' });
        },
        (err) => {
          const failed = err instanceof SmtpReply && err.responseCode === 535;
          const answer = () => {
            attempts.end(address, failed);
            callback(asError(replyFor(err, opts.log)));
          };
          if (failed) setTimeout(answer, failureDelayMs);
          else answer();
        },
      );
    },
    onMailFrom(from, session, callback) {
      if (!requireAuth(session, callback)) return;
      const address = from.address ? from.address.toLowerCase() : null;
      handler.mailFrom(users.get(session)!, address).then(
        () => callback(),
        (err) => callback(asError(replyFor(err, opts.log))),
      );
    },
    onRcptTo(to, session, callback) {
      if (!requireAuth(session, callback)) return;
      if (session.envelope.rcptTo.length >= opts.maxRecipients) {
        return callback(asError(new SmtpReply(452, `4.5.3 Too many recipients: at most ${opts.maxRecipients} per message; send the rest in another message`)));
      }
      if (!ADDRESS_SHAPE.test(to.address)) return callback(asError(new SmtpReply(553, `5.1.3 ${to.address} is not an email address`)));
      callback();
    },
    onData(stream, session, callback) {
      if (!users.has(session)) {
        stream.resume();
        return requireAuth(session, callback);
      }
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

  const listenOn = (secure: boolean, port: number): Promise<number> => {
    const server = new SMTPServer(options(secure));
    servers.push(server);
    return listenSmtp(server, opts.host, port, opts.gate, opts.log, 'SMTP submission');
  };

  const closeAll = () => closeSmtp(servers);
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
