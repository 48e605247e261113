import http from 'node:http';
import type net from 'node:net';

export interface HttpServer {
  port: number;
  /**
   * Stops taking connections (new ones are refused), lets the requests in flight finish, each
   * answered with `Connection: close` so keep-alive clients do not send more, and resolves once every
   * connection is gone; after `timeoutMs` the ones left are cut.
   */
  close(timeoutMs: number): Promise<void>;
}

export async function listen(handler: http.RequestListener, opts: { host: string; port: number }): Promise<HttpServer> {
  const open = new Set<http.ServerResponse>();
  let closing = false;
  const server = http.createServer((req, res) => {
    open.add(res);
    res.once('close', () => open.delete(res));
    if (closing) res.setHeader('Connection', 'close');
    handler(req, res);
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    close: (timeoutMs) =>
      new Promise<void>((resolve) => {
        closing = true;
        for (const res of open) if (!res.headersSent) res.setHeader('Connection', 'close');
        const timer = setTimeout(() => server.closeAllConnections(), timeoutMs);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
