import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Resolver } from '../../dns/resolver';

export class WebhookError extends Error {
  constructor(
    message: string,
    /** Worth trying again (timeouts, 5xx, network) or not (refused address, 4xx). */
    readonly retryable: boolean,
  ) {
    super(message);
  }
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

function ipv4ToInt(ip: string): number {
  return ip.split('.').reduce((n, octet) => (n << 8) + Number(octet), 0) >>> 0;
}

const V4_BLOCKED: Array<[string, number]> = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, including cloud metadata at 169.254.169.254
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];

/** Loopback, private, link-local (cloud metadata), multicast and reserved addresses. */
export function isPrivateAddress(ip: string): boolean {
  if (net.isIPv4(ip)) {
    const n = ipv4ToInt(ip);
    return V4_BLOCKED.some(([base, bits]) => (n >>> (32 - bits)) === (ipv4ToInt(base) >>> (32 - bits)));
  }
  const v6 = ip.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v6);
  if (mapped) return isPrivateAddress(mapped[1]);
  return (
    v6 === '::' ||
    v6 === '::1' ||
    /^f[cd][0-9a-f]{2}:/.test(v6) || // unique local fc00::/7
    /^fe[89ab][0-9a-f]:/.test(v6) || // link-local fe80::/10
    /^ff[0-9a-f]{2}:/.test(v6) || // multicast
    v6.startsWith('fd00:ec2::') // AWS metadata over IPv6
  );
}

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
}

export async function callWebhook(req: WebhookRequest, deps: WebhookDeps): Promise<WebhookResponse> {
  let url = new URL(req.url);
  let method = req.method;
  let body = req.body;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebhookError(`unsupported scheme ${url.protocol}`, false);
    const address = await addressOf(url.hostname.replace(/^\[|\]$/g, ''), deps);
    const res = await send(url, address, method, req.headers, body, deps.timeoutMs ?? 10_000);
    if (res.status >= 300 && res.status < 400 && res.headers.location) {
      url = new URL(res.headers.location, url);
      if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
      }
      continue;
    }
    if (res.status >= 500 || res.status === 429) throw new WebhookError(`webhook answered ${res.status}`, true);
    if (res.status >= 400) throw new WebhookError(`webhook answered ${res.status}`, false);
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
  const blocked = candidates.filter((ip) => isPrivateAddress(ip) && !allowed(ip));
  if (blocked.length) throw new WebhookError(`${host} resolves to a private, loopback or metadata address (${blocked[0]}); refused`, false);
  return candidates[0];
}

function send(url: URL, address: string, method: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number): Promise<WebhookResponse> {
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
