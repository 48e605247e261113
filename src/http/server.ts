import http from 'node:http';
import type net from 'node:net';
import { type ConnectionGate, gateServer } from '../net/connection-limits';

export interface HttpServer {
  port: number;
  /**
   * Keeps taking connections but answers every request with `Connection: close`, so a keep-alive
   * client reconnects (to another instance, behind a load balancer) instead of reusing a connection
   * that `close` will cut under a request it is sending.
   */
  drain(): void;
  /**
   * Stops taking connections (new ones are refused), lets the requests in flight finish, each
   * answered with `Connection: close` so keep-alive clients do not send more, and resolves once every
   * connection is gone; after `timeoutMs` the ones left are cut.
   */
  close(timeoutMs: number): Promise<void>;
}

export interface ListenOptions {
  host: string;
  port: number;
  /** The listener's connection limits. */
  gate: ConnectionGate;
  /**
   * A connection must send a whole request head within this long of connecting (or of starting its next
   * request), or get 408. Between requests a keep-alive connection is idle, and closed after 65 s.
   */
  headersTimeoutMs: number;
}

export async function listen(handler: http.RequestListener, opts: ListenOptions): Promise<HttpServer> {
  const open = new Set<http.ServerResponse>();
  let draining = false;
  // Connections are checked against the timeouts every second, so an idle one is closed within a second of its deadline.
  const timeouts = { headersTimeout: opts.headersTimeoutMs, requestTimeout: Math.max(opts.headersTimeoutMs, 300_000), connectionsCheckingInterval: 1000 };
  const server = http.createServer(timeouts, (req, res) => {
    open.add(res);
    res.once('close', () => open.delete(res));
    if (draining) res.setHeader('Connection', 'close');
    handler(req, res);
  });
  server.keepAliveTimeout = 65_000;
  gateServer(server, opts.gate);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const drain = () => {
    draining = true;
    for (const res of open) if (!res.headersSent) res.setHeader('Connection', 'close');
  };
  return {
    port: (server.address() as net.AddressInfo).port,
    drain,
    close: (timeoutMs) =>
      new Promise<void>((resolve) => {
        drain();
        const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
