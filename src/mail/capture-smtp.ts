import { SMTPServer } from 'smtp-server';
import type { Logger } from 'pino';
import type { ConnectionGate } from '../net/connection-limits';
import { listenSmtp } from './smtp-listener';

export interface CapturedMessage {
  envelopeFrom: string | null;
  envelopeTo: string[];
  raw: Buffer;
}

export interface CaptureServer {
  port: number;
  close(): Promise<void>;
}

/**
 * The dev mailbox's SMTP side: accepts every message on loopback, without auth or TLS, and hands it
 * to `store`. A failed store answers 451 so the sender retries instead of losing the message.
 */
export async function startCaptureSmtp(opts: {
  port: number;
  store: (msg: CapturedMessage) => Promise<void>;
  log: Logger;
  gate: ConnectionGate;
}): Promise<CaptureServer> {
  const server = new SMTPServer({
    authOptional: true,
    disableReverseLookup: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    banner: 'postbox dev mailbox',
    size: 64 * 1024 * 1024,
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const msg: CapturedMessage = {
          envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : null,
          envelopeTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
        };
        opts.store(msg).then(
          () => callback(),
          (err) => {
            opts.log.error({ err }, 'dev mailbox could not store a message');
            callback(Object.assign(new Error('Temporary failure storing message'), { responseCode: 451 }));
          },
        );
      });
    },
  });
  const port = await listenSmtp(server, '127.0.0.1', opts.port, opts.gate, opts.log, 'dev mailbox SMTP');
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
