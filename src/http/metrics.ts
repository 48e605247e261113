import { content, endpoint } from './endpoint';
import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { Metrics } from '../metrics';
import { type HttpServer, listen } from './server';

// Anything else a client may send is one label value, so it cannot grow the series.
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Counts and times every request by the router's matched pattern (`/campaigns/:id`), never the raw path. */
export function httpMetrics(metrics: Metrics) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const end = metrics.httpDuration.startTimer();
    try {
      await next();
    } finally {
      const route = (ctx as { _matchedRoute?: string | RegExp })._matchedRoute;
      const labels = {
        method: METHODS.has(ctx.method) ? ctx.method : 'OTHER',
        route: route === undefined ? 'unmatched' : String(route),
        status: String(ctx.status),
      };
      metrics.httpRequests.inc(labels);
      end(labels);
    }
  };
}

/** GET /metrics, without authentication: Prometheus scrapes it. */
export function metricsRoutes(router: Router, metrics: Metrics): void {
  router.get(
    '/metrics',
    endpoint({ tag: 'Operations', summary: 'Prometheus metrics', responses: { 200: content('text/plain', 'The Prometheus text exposition format') } }, async (ctx) => {
      ctx.type = metrics.contentType;
      ctx.body = await metrics.text();
    }),
  );
}

/** METRICS_PORT: GET /metrics on a listener of its own, for roles without the HTTP API (workers). */
export function serveMetrics(metrics: Metrics, host: string, port: number): Promise<HttpServer> {
  return listen(
    (req, res) => {
      if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      metrics.text().then(
        (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
        (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(err.message),
      );
    },
    { host, port },
  );
}
