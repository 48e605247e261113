import crypto from 'node:crypto';
import { content, endpoint } from './endpoint';
import { AppError, unauthorized } from '../errors';
import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { Metrics } from '../metrics';
import { type HttpServer, listen, type ListenOptions } from './server';

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

/** Whether an Authorization header carries the metrics token (compared in constant time). */
function hasToken(authorization: string | undefined, token: string): boolean {
  const given = Buffer.from(/^Bearer (.+)$/i.exec(authorization ?? '')?.[1] ?? '');
  const wanted = Buffer.from(token);
  return given.length === wanted.length && crypto.timingSafeEqual(given, wanted);
}

/**
 * GET /metrics on the API port, which faces the internet: only with METRICS_TOKEN set, and only for a
 * request that carries it as a bearer token. Without a token the metrics live on METRICS_PORT alone.
 */
export function metricsRoutes(router: Router, metrics: Metrics, token: string | undefined): void {
  router.get(
    '/metrics',
    endpoint(
      {
        tag: 'Operations',
        summary: 'Prometheus metrics (with METRICS_TOKEN as a bearer token)',
        responses: { 200: content('text/plain', 'The Prometheus text exposition format') },
        errors: { 401: 'No or a wrong bearer token', 404: 'METRICS_TOKEN is not set: metrics are served on METRICS_PORT only' },
      },
      async (ctx) => {
        if (!token) throw new AppError(404, 'NOT_FOUND', 'GET /metrics is served on METRICS_PORT, or here when METRICS_TOKEN is set');
        if (!hasToken(ctx.get('authorization'), token)) throw unauthorized('GET /metrics needs the METRICS_TOKEN as a bearer token');
        ctx.type = metrics.contentType;
        ctx.body = await metrics.text();
      },
    ),
  );
}

/** METRICS_PORT: GET /metrics on a listener of its own, for roles without the HTTP API (workers). */
export function serveMetrics(metrics: Metrics, listenOn: ListenOptions, token?: string, health?: () => Promise<void>): Promise<HttpServer> {
  return listen((req, res) => {
    // GET /health: the container's healthcheck (a worker has no other listener); 503 says why.
    if (req.method === 'GET' && req.url?.split('?')[0] === '/health' && health) {
      health().then(
        () => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'),
        (err: Error) => res.writeHead(503, { 'content-type': 'text/plain' }).end(err.message),
      );
      return;
    }
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    if (token && !hasToken(req.headers.authorization, token)) {
      res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' }).end('GET /metrics needs the METRICS_TOKEN as a bearer token');
      return;
    }
    metrics.text().then(
      (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(err.message),
    );
  }, listenOn);
}
