/**
 * The gRPC port's own TCP listener in front of grpc-js. grpc-js serves every connection it accepts and
 * waits on a silent one forever, so a flood of idle connections would hold descriptors without end.
 * Here a connection is counted in total and per client address (past either it is closed at once: gRPC
 * has no refusal at the TCP level), and it reaches grpc-js only once it has sent the HTTP/2 preface.
 */
import net from 'node:net';
import type * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';

export interface GrpcConnectionLimits {
  /** Connections held at once (those still owing their preface too). */
  max: number;
  /** Connections held at once from one client address. */
  perClient: number;
  /** A connection that has not sent the HTTP/2 client preface this long after connecting is closed. */
  prefaceTimeoutMs: number;
}

export type ConnectionRefusal = 'total' | 'per_client';

export interface GrpcListener {
  port: number;
  /** Stops accepting and closes connections that have not reached grpc-js yet. */
  close(): void;
  /** Closes every connection still open (after grpc-js had its chance to end them gracefully). */
  destroyAll(): void;
}

/** What every HTTP/2 client sends first (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/** `::ffff:127.0.0.2` and `127.0.0.2` are one client. */
const clientKey = (address: string | undefined) => (address ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');

export async function listenGrpc(opts: {
  host: string;
  port: number;
  limits: GrpcConnectionLimits;
  injector: grpc.ConnectionInjector;
  log: Logger;
  /** Told of every connection closed at the limits, instead of the listener's own warning. */
  onRefused?: (reason: ConnectionRefusal, client: string) => void;
}): Promise<GrpcListener> {
  const { limits, log } = opts;
  const sockets = new Set<net.Socket>();
  const awaitingPreface = new Set<net.Socket>();
  const byClient = new Map<string, number>();
  let refusedSinceLog = 0;
  let lastLog = 0;

  // Logged at most once a minute, so a flood does not flood the log too; an embedder's callback replaces the log.
  const refused = (reason: ConnectionRefusal, client: string) => {
    if (opts.onRefused) return opts.onRefused(reason, client);
    refusedSinceLog++;
    const now = Date.now();
    if (now - lastLog < 60_000) return;
    log.warn(
      { client, reason, refused: refusedSinceLog, limits },
      reason === 'total' ? 'gRPC connection refused: the port holds its most connections' : 'gRPC connection refused: this client holds its most connections',
    );
    refusedSinceLog = 0;
    lastLog = now;
  };

  const server = net.createServer({ noDelay: true }, (socket) => {
    // A client that resets its end must not raise an unhandled 'error' (grpc-js adds its own later).
    socket.on('error', () => undefined);
    const client = clientKey(socket.remoteAddress);
    const fromClient = byClient.get(client) ?? 0;
    const refusal = sockets.size >= limits.max ? 'total' : fromClient >= limits.perClient ? 'per_client' : undefined;
    if (refusal) {
      refused(refusal, client);
      socket.destroy();
      return;
    }
    sockets.add(socket);
    byClient.set(client, fromClient + 1);
    socket.once('close', () => {
      sockets.delete(socket);
      awaitingPreface.delete(socket);
      const left = (byClient.get(client) ?? 1) - 1;
      if (left > 0) byClient.set(client, left);
      else byClient.delete(client);
    });
    awaitingPreface.add(socket);
    awaitPreface(socket, limits.prefaceTimeoutMs, () => {
      awaitingPreface.delete(socket);
      opts.injector.injectConnection(socket);
    });
  });
  // One over the total: a connection being refused is counted by the server until it closes.
  server.maxConnections = limits.max + 1;
  server.on('drop', (data?: { remoteAddress?: string }) => refused('total', clientKey(data?.remoteAddress)));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.error({ err }, 'gRPC listener error'));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      server.close();
      for (const socket of awaitingPreface) socket.destroy();
    },
    destroyAll: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

/**
 * Reads the client preface off `socket` and puts it back before `ready` hands the socket on: grpc-js
 * (node:http2) then reads it as if nothing had. Anything else, or nothing within `timeoutMs`, closes it.
 */
function awaitPreface(socket: net.Socket, timeoutMs: number, ready: () => void): void {
  let received = Buffer.alloc(0);
  const timer = setTimeout(() => socket.destroy(), timeoutMs);
  timer.unref();
  const onReadable = () => {
    for (let chunk: Buffer | null; (chunk = socket.read() as Buffer | null) !== null;) received = Buffer.concat([received, chunk]);
    const n = Math.min(received.length, PREFACE.length);
    if (!received.subarray(0, n).equals(PREFACE.subarray(0, n))) {
      clearTimeout(timer);
      socket.destroy();
      return;
    }
    if (received.length < PREFACE.length) return;
    clearTimeout(timer);
    socket.off('readable', onReadable);
    socket.unshift(received);
    ready();
  };
  socket.on('readable', onReadable);
  socket.once('close', () => clearTimeout(timer));
}
