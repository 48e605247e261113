/**
 * The Temporal Web UI of the dev server on its own port (as `temporal server start-dev` serves it
 * on 8233): the static single-page app from `webui/` plus the `/api/v1` API it calls, including
 * ui-server's own `/api/v1/settings` and history download. Writes need the double-submit CSRF
 * token (the `_csrf` cookie echoed in `X-CSRF-TOKEN`), as Temporal's ui-server asks, and a browser's
 * `Sec-Fetch-Site` or `Origin` naming this UI. Every request must name this machine in `Host`, so a
 * page whose DNS name rebinds to 127.0.0.1 reaches nothing.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import path from 'node:path';
import { status } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { Logger } from 'pino';
import { root } from '../proto';
import { RpcError } from '../rpc/errors';
import { type ApiReply, errorReply, Gateway, type GatewayService, httpCallContext, rpcErrorReply } from './gateway';
import { type Json, messageToJson } from './json';

export interface UiServerOptions {
  /** Default 127.0.0.1: the UI can act on every execution and has no login. */
  host?: string;
  port: number;
  services: GatewayService[];
  log: Logger;
  /** The UI version `/api/v1/settings` reports (the UI encodes paths by it). */
  uiVersion: string;
  /** Resolves with the directory of the built app once it exists; until then pages answer 503. */
  app?: Promise<string>;
  /** Host header values answered besides 127.0.0.1, localhost and [::1] on this port: `name` (any port) or `name:port`. */
  allowedHosts?: string[];
  /** Called with the listener before it listens (an embedding service's connection limits). */
  guard?: (server: net.Server) => void;
}

export interface UiServer {
  url: string;
  port: number;
  /** Resolves when the app is served (or rejects when its build failed). */
  ready: Promise<void>;
  stop(): Promise<void>;
}

const MAX_BODY_BYTES = 16 * 1024 * 1024;
const CSRF_COOKIE = '_csrf';
const CSRF_HEADER = 'x-csrf-token';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.ttf': 'font/ttf',
  '.txt': 'text/plain; charset=utf-8',
};

/** Everything the page may load comes from its own origin; SvelteKit's bootstrap script is inline. */
const CSP = [
  "default-src 'self'",
  "script-src 'self' 'unsafe-inline'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "frame-ancestors 'none'",
].join('; ');

function cookies(req: http.IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0) out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

const LOOPBACK_NAMES = ['127.0.0.1', 'localhost', '[::1]'];

/** Whether `Host` names this machine: a loopback name on our own port, or a name the operator allowed. */
export function hostAllowed(host: string | undefined, port: number, allowed: string[] = []): boolean {
  if (!host) return false;
  const name = host.toLowerCase();
  const bare = name.replace(/:\d+$/, '');
  return LOOPBACK_NAMES.some((n) => name === `${n}:${port}`) || allowed.includes(name) || allowed.includes(bare);
}

/**
 * A write from a browser comes from this UI's own pages: `Sec-Fetch-Site` (sent by every current browser)
 * says same-origin, or else `Origin` is this host. Clients that send neither (curl, SDKs) are not browsers.
 */
function sameOriginWrite(req: http.IncomingMessage): boolean {
  const site = req.headers['sec-fetch-site'];
  if (typeof site === 'string') return site === 'same-origin' || site === 'none';
  const origin = req.headers.origin;
  if (typeof origin !== 'string') return true;
  try {
    return new URL(origin).host === req.headers.host?.toLowerCase();
  } catch {
    return false;
  }
}

function csrfValid(req: http.IncomingMessage): boolean {
  const cookie = cookies(req)[CSRF_COOKIE];
  const header = req.headers[CSRF_HEADER];
  if (!cookie || typeof header !== 'string') return false;
  const a = Buffer.from(cookie);
  const b = Buffer.from(header);
  return a.length === b.length && timingSafeEqual(a, b);
}

function sendJson(res: http.ServerResponse, reply: ApiReply, extraHeaders: Record<string, string> = {}): void {
  const body = JSON.stringify(reply.body);
  res.writeHead(reply.status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...extraHeaders });
  res.end(body);
}

async function readJsonBody(req: http.IncomingMessage): Promise<Json | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw errorReply(status.RESOURCE_EXHAUSTED, `request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (!text) return undefined;
  try {
    return JSON.parse(text) as Json;
  } catch {
    throw errorReply(status.INVALID_ARGUMENT, 'the request body is not valid JSON');
  }
}

/** What `/api/v1/settings` answers: PascalCase, as ui-server; writes the dev server lacks are disabled. */
export function uiSettings(gateway: Gateway, uiVersion: string): Json {
  return {
    Auth: { Enabled: false, Options: null },
    BannerText: '',
    DefaultNamespace: 'default',
    ShowTemporalSystemNamespace: false,
    FeedbackURL: '',
    NotifyOnNewVersion: false,
    Codec: { Endpoint: '', PassAccessToken: false, IncludeCredentials: false },
    Version: uiVersion,
    DisableWriteActions: false,
    WorkflowTerminateDisabled: !gateway.implements('TerminateWorkflowExecution'),
    WorkflowCancelDisabled: !gateway.implements('RequestCancelWorkflowExecution'),
    WorkflowSignalDisabled: !gateway.implements('SignalWorkflowExecution'),
    WorkflowUpdateDisabled: !gateway.implements('UpdateWorkflowExecution'),
    WorkflowResetDisabled: !gateway.implements('ResetWorkflowExecution'),
    BatchActionsDisabled: !gateway.implements('StartBatchOperation'),
    // The bundled app has no start-workflow page.
    StartWorkflowDisabled: true,
    HideWorkflowQueryErrors: false,
    RefreshWorkflowCountsDisabled: false,
    ActivityCommandsDisabled: true,
  };
}

const HISTORY_JSON = /^\/api\/v1\/namespaces\/([^/]+)\/workflows\/([^/]+)\/run\/([^/]+)\/history\.json$/;

export async function startUiServer(opts: UiServerOptions): Promise<UiServer> {
  const log = opts.log.child({ component: 'temporal-ui' });
  const gateway = new Gateway(opts.services, log);
  const settings = uiSettings(gateway, opts.uiVersion);
  const historyHandler = opts.services.flatMap((s) => (s.handlers.GetWorkflowExecutionHistory ? [s.handlers.GetWorkflowExecutionHistory] : []))[0];

  let appDir: string | undefined;
  let appError: string | undefined;
  const ready = (opts.app ?? new Promise<string>(() => undefined)).then(
    (dir) => {
      appDir = dir;
      log.info({ dir }, 'Temporal Web UI app ready');
    },
    (err: unknown) => {
      appError = err instanceof Error ? err.message : String(err);
      throw err;
    },
  );
  ready.catch(() => undefined);

  /** The full history of a run as one JSON document (ui-server's download). */
  async function historyJson(req: http.IncomingMessage, res: http.ServerResponse, m: RegExpExecArray): Promise<ApiReply> {
    if (!historyHandler) return errorReply(status.UNIMPLEMENTED, 'history is not available');
    const [namespace, workflowId, runId] = m.slice(1).map(decodeURIComponent);
    const events: unknown[] = [];
    let nextPageToken: Uint8Array | undefined;
    const reqType = root.lookupType('temporal.api.workflowservice.v1.GetWorkflowExecutionHistoryRequest');
    const resType = root.lookupType('temporal.api.workflowservice.v1.GetWorkflowExecutionHistoryResponse') as protobuf.Type;
    do {
      const request = reqType.fromObject({ namespace, execution: { workflowId, runId }, nextPageToken, maximumPageSize: 1000 });
      let result: Awaited<ReturnType<typeof historyHandler>>;
      try {
        result = await historyHandler(request, httpCallContext(req, res));
      } catch (err) {
        // A missing namespace or run is the handler's NOT_FOUND, as on the gateway's routes.
        if (err instanceof RpcError) return rpcErrorReply(err);
        throw err;
      }
      const page = (Buffer.isBuffer(result) ? resType.decode(result) : resType.decode(resType.encode(result).finish())) as unknown as {
        history?: { events?: unknown[] };
        nextPageToken?: Uint8Array;
      };
      events.push(...(page.history?.events ?? []));
      nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
    } while (nextPageToken);
    return { status: 200, body: messageToJson(root.lookupType('temporal.api.history.v1.History'), { events }) };
  }

  async function serveApi(req: http.IncomingMessage, res: http.ServerResponse, url: URL): Promise<void> {
    const verb = req.method ?? 'GET';
    if (!SAFE_METHODS.has(verb) && !csrfValid(req)) {
      sendJson(res, errorReply(status.PERMISSION_DENIED, 'missing or invalid CSRF token: send the _csrf cookie value in the X-CSRF-TOKEN header'));
      return;
    }
    if (!SAFE_METHODS.has(verb) && !sameOriginWrite(req)) {
      sendJson(res, errorReply(status.PERMISSION_DENIED, 'a write from another site: Sec-Fetch-Site or Origin does not name this UI'));
      return;
    }
    if (url.pathname === '/api/v1/settings' && verb === 'GET') {
      sendJson(res, { status: 200, body: settings });
      return;
    }
    const history = verb === 'GET' ? HISTORY_JSON.exec(url.pathname) : null;
    if (history) {
      const reply = await historyJson(req, res, history);
      sendJson(res, reply, reply.status === 200 ? { 'content-disposition': `attachment; filename="${history[3]}-history.json"` } : {});
      return;
    }
    const body = SAFE_METHODS.has(verb) ? undefined : await readJsonBody(req);
    const reply = await gateway.handle({ verb, path: url.pathname, query: url.searchParams, body, ctx: httpCallContext(req, res) });
    if (res.destroyed) return;
    sendJson(res, reply ?? errorReply(status.NOT_FOUND, 'Not Found'));
  }

  function serveApp(req: http.IncomingMessage, res: http.ServerResponse, url: URL, csrfCookie: Record<string, string>): void {
    if (!appDir) {
      const message = appError
        ? `The Temporal Web UI could not be built: ${appError}\nSee the service log.`
        : 'The Temporal Web UI is being built (first start); this page answers once it is ready.';
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8', 'retry-after': '10', 'cache-control': 'no-store' });
      res.end(`${message}\n`);
      return;
    }
    let rel: string;
    try {
      rel = path.normalize(decodeURIComponent(url.pathname)).replace(/^([/\\])+/, '');
    } catch {
      rel = '';
    }
    let file = path.join(appDir, rel);
    if (!file.startsWith(appDir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      // Assets that do not exist are 404; every other path is a page of the single-page app.
      if (rel.startsWith('_app/') || path.extname(rel)) {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('Not Found\n');
        return;
      }
      file = path.join(appDir, 'index.html');
    }
    const immutable = rel.startsWith('_app/immutable/');
    res.writeHead(200, {
      'content-type': CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream',
      'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
      'content-security-policy': CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      ...csrfCookie,
    });
    if (req.method === 'HEAD') res.end();
    else fs.createReadStream(file).pipe(res);
  }

  let port = opts.port;
  // No request deadline (history long polls outlive any), but a connection that sends no request head
  // within 10 s is closed.
  const timeouts = { headersTimeout: 10_000, requestTimeout: 0, connectionsCheckingInterval: 1000 };
  const server = http.createServer(timeouts, (req, res) => {
    if (!hostAllowed(req.headers.host, port, opts.allowedHosts)) {
      res.writeHead(421, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' });
      res.end(`This Temporal Web UI answers only to 127.0.0.1:${port}, localhost:${port} or [::1]:${port}, not to "${req.headers.host ?? ''}".\n`);
      return;
    }
    const url = new URL(req.url ?? '/', 'http://ui.invalid');
    // Hand every browser a CSRF token it can read and echo. Not HttpOnly: the bundled UI reads it from
    // document.cookie to echo it in X-CSRF-TOKEN, as with Temporal's own ui-server.
    const csrfCookie: Record<string, string> = cookies(req)[CSRF_COOKIE]
      ? {}
      : { 'set-cookie': `${CSRF_COOKIE}=${randomBytes(24).toString('base64url')}; Path=/; SameSite=Strict` };
    if (url.pathname.startsWith('/api/')) {
      serveApi(req, res, url).catch((err: unknown) => {
        if (res.headersSent) return res.destroy();
        if (err && typeof err === 'object' && 'status' in err && 'body' in err) return sendJson(res, err as ApiReply);
        log.error({ err }, 'HTTP API request failed');
        sendJson(res, errorReply(status.INTERNAL, 'internal error'));
      });
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' });
      res.end();
      return;
    }
    serveApp(req, res, url, csrfCookie);
  });
  opts.guard?.(server);
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as { port: number }).port;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  return {
    url,
    port,
    ready,
    stop: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
