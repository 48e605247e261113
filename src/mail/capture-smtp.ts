import { SMTPServer } from 'smtp-server';
import type { Logger } from 'pino';
import net from 'node:net';
import { type ConnectionGate, gateServer, refuseWithLine } from '../net/connection-limits';

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
  server.on('error', (err) => opts.log.error({ err }, 'dev mailbox SMTP error'));
  gateServer(server.server as net.Server, opts.gate, refuseWithLine('421 4.7.0 Too many connections; try again later'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, '127.0.0.1', () => resolve());
  });
  const { port } = (server.server as net.Server).address() as net.AddressInfo;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}
