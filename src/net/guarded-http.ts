import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Resolver } from '../dns/resolver';
import { AppError } from '../errors';

export class WebhookError extends Error {
  constructor(
    /** What the project may see (delivery logs, step output): never how our own network resolves. */
    message: string,
    /** Worth trying again (timeouts, 5xx, network) or not (refused address, 4xx). */
    readonly retryable: boolean,
    /** The HTTP status the receiver answered, when it answered. */
    readonly status?: number,
    /** For the service's own log only: the addresses a host resolved to, and the like. */
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** The address refusal a project is told about: the same whatever the name resolved to, so it maps nothing. */
export const NOT_PUBLIC = 'the URL does not lead to a public address (loopback, private, link-local and metadata addresses are refused)';

/**
 * A URL whose host is written as a loopback, private, link-local or metadata address (or `localhost`):
 * refused when the webhook is saved, not at every delivery. Names are checked when they are called.
 */
export function literalPrivateTarget(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[|\]$/g, '').toLowerCase();
  } catch {
    return false;
  }
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  return net.isIP(host) !== 0 && !isPublicAddress(host);
}

/** 422 naming `field` when `url` is written as an address no webhook may call (unless private targets are allowed). */
export function refusePrivateTarget(url: string | undefined, field: string, allowPrivate: boolean): void {
  if (allowPrivate || url === undefined || !literalPrivateTarget(url)) return;
  throw new AppError(422, 'VALIDATION_ERROR', 'Request validation failed', {
    errors: [{ field, message: `${NOT_PUBLIC}; set WEBHOOK_ALLOW_PRIVATE=true on a private deployment`, code: 'invalid_string' }],
  });
}

export interface WebhookRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

export interface WebhookResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const MAX_REDIRECTS = 5;
const MAX_BODY = 256 * 1024;

// IPv4-compatible addresses (::a.b.c.d, deprecated by RFC 4291) are the one spelling ipaddr.js calls
// `unicast` that embeds an IPv4 address; the whole ::/96 block (with :: and ::1) is refused.
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

/**
 * Whether a webhook may connect to this address: only what ipaddr.js classifies as global `unicast`
 * after `process()` (which turns IPv4-mapped IPv6 into the IPv4 it carries). Loopback, private,
 * link-local (cloud metadata), unspecified, multicast, broadcast, reserved, NAT64 (64:ff9b::/96),
 * 6to4, Teredo and every other special range is refused. A zone id (fe80::1%eth0) is part of
 * link-local, so it is refused too; what cannot be parsed is refused.
 */
export function isPublicAddress(ip: string): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.process(ip);
  } catch {
    return false;
  }
  if (addr.kind() === 'ipv6' && (addr as ipaddr.IPv6).match(IPV4_COMPATIBLE)) return false;
  return addr.range() === 'unicast';
}

/** `::ffff:a9fe:a9fe = 169.254.169.254, linkLocal`: what an address really is, for refusals. */
function describeAddress(ip: string): string {
  try {
    const addr = ipaddr.process(ip);
    return `${ip}${addr.toString() !== ip ? ` = ${addr.toString()}` : ''}, ${addr.range()}`;
  } catch {
    return ip;
  }
}

/**
 * Headers that may follow a redirect to another origin. Like fetch, credentials (Authorization, Cookie,
 * Proxy-Authorization) stay behind; so does every other header the caller chose, since a WEBHOOK step's
 * headers can hold a key under any name. The Standard Webhooks headers are signatures, not secrets.
 */
const CROSS_ORIGIN_HEADER = /^(content-type|accept|user-agent|webhook-(id|timestamp|signature))$/i;

/**
 * Calls a webhook with a 10 s budget per hop. Every hop's host is resolved through the service's
 * resolver and the connection is pinned to the address that was checked, so neither a redirect nor a
 * DNS answer that changes between check and connect can reach a private, loopback or metadata
 * address (unless `allowPrivate`, for tests and private deployments).
 */
export interface WebhookDeps {
  resolver: Resolver;
  /** true: no address is refused; a function: these private addresses are allowed (tests). */
  allowPrivate: boolean | ((ip: string) => boolean);
  timeoutMs?: number;
  /** Aborts the call in flight (a worker shutting down). */
  signal?: AbortSignal;
}

export async function callWebhook(req: WebhookRequest, deps: WebhookDeps): Promise<WebhookResponse> {
  let url: URL;
  try {
    url = new URL(req.url);
  } catch {
    throw new WebhookError(`${req.url} is not a valid URL`, false);
  }
  let method = req.method;
  let body = req.body;
  let headers = req.headers;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebhookError(`unsupported scheme ${url.protocol}`, false);
    const address = await addressOf(url.hostname.replace(/^\[|\]$/g, ''), deps);
    const res = await send(url, address, method, headers, body, deps.timeoutMs ?? 10_000, deps.signal);
    if (res.status >= 300 && res.status < 400 && res.headers.location) {
      const next = new URL(res.headers.location, url);
      if (next.origin !== url.origin) headers = Object.fromEntries(Object.entries(headers).filter(([name]) => CROSS_ORIGIN_HEADER.test(name)));
      url = next;
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      continue;
    }
    if (res.status >= 500 || res.status === 429) throw new WebhookError(`webhook answered ${res.status}`, true, res.status);
    if (res.status >= 400) throw new WebhookError(`webhook answered ${res.status}`, false, res.status);
    return res;
  }
  throw new WebhookError(`more than ${MAX_REDIRECTS} redirects`, false);
}

async function addressOf(host: string, deps: WebhookDeps): Promise<string> {
  let candidates: string[];
  if (net.isIP(host)) candidates = [host];
  else {
    const [a, aaaa] = await Promise.all([deps.resolver.lookup(host, 'A').catch(() => undefined), deps.resolver.lookup(host, 'AAAA').catch(() => undefined)]);
    candidates = [...(a?.answers ?? []), ...(aaaa?.answers ?? [])];
    if (candidates.length === 0) throw new WebhookError(`${host} does not resolve`, true);
  }
  if (deps.allowPrivate === true) return candidates[0];
  const allowed = typeof deps.allowPrivate === 'function' ? deps.allowPrivate : () => false;
  const blocked = candidates.filter((ip) => !isPublicAddress(ip) && !allowed(ip));
  if (blocked.length) throw new WebhookError(NOT_PUBLIC, false, undefined, `${host} resolves to ${describeAddress(blocked[0])}`);
  return candidates[0];
}

function send(
  url: URL,
  address: string,
  method: string,
  headers: Record<string, string>,
  body: string | undefined,
  timeoutMs: number,
  signal?: AbortSignal,
): Promise<WebhookResponse> {
  return new Promise((resolve, reject) => {
    const client = url.protocol === 'https:' ? https : http;
    const request = client.request(
      {
        method,
        hostname: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port || undefined,
        path: url.pathname + url.search,
        headers: { 'user-agent': 'postbox-webhooks/1', ...headers, ...(body !== undefined ? { 'content-length': Buffer.byteLength(body) } : {}) },
        // The checked address, whatever DNS would say now; TLS still verifies the host name.
        lookup: ((_host: string, opts: { all?: boolean }, cb: (...args: unknown[]) => void) => {
          const family = net.isIPv6(address) ? 6 : 4;
          if (opts?.all) cb(null, [{ address, family }]);
          else cb(null, address, family);
        }) as never,
        timeout: timeoutMs,
        signal,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size <= MAX_BODY) chunks.push(c);
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: Object.fromEntries(Object.entries(res.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v)])),
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', (err) => reject(new WebhookError(err.message, true)));
      },
    );
    const deadline = setTimeout(() => request.destroy(new WebhookError(`no answer within ${timeoutMs} ms`, true)), timeoutMs);
    request.on('timeout', () => request.destroy(new WebhookError(`no answer within ${timeoutMs} ms`, true)));
    request.on('error', (err) => reject(err instanceof WebhookError ? err : new WebhookError(err.message, true)));
    request.on('close', () => clearTimeout(deadline));
    if (body !== undefined) request.write(body);
    request.end();
  });
}
