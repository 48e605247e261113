/**
 * The `/api/v1` HTTP API of the dev server, as grpc-gateway serves it in front of a Temporal
 * frontend: every `google.api.http` binding under `/api/v1` of the WorkflowService and
 * OperatorService (from the annotations shipped in @temporalio/proto) routed straight to the same
 * handler tables the gRPC server uses, in proto3 canonical JSON both ways, errors as
 * `{code, message, details}` with grpc-gateway's HTTP status for each gRPC code.
 */
import type http from 'node:http';
import { status } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { Logger } from 'pino';
import { root } from '../proto';
import { RpcError } from '../rpc/errors';
import type { CallContext, Handlers } from '../rpc/grpc-server';
import { type Json, messageFromJson, messageToJson, queryToJson } from './json';

export interface GatewayService {
  /** Fully-qualified service name, e.g. `temporal.api.workflowservice.v1.WorkflowService`. */
  name: string;
  handlers: Handlers;
}

type Segment = string | { field: string[] };

export interface Route {
  verb: string;
  segments: Segment[];
  /** `*` (the whole body is the request), a field name, or undefined (no body). */
  body?: string;
  method: protobuf.Method;
  handler?: Handlers[string];
}

interface HttpRule {
  get?: string;
  post?: string;
  put?: string;
  delete?: string;
  patch?: string;
  body?: string;
  additional_bindings?: HttpRule | HttpRule[];
}

const VERBS = ['get', 'post', 'put', 'delete', 'patch'] as const;
const PREFIX = '/api/v1/';

function parseTemplate(template: string): Segment[] {
  return template
    .slice(1)
    .split('/')
    .map((part) => {
      const m = /^\{([a-zA-Z0-9_.]+)\}$/.exec(part);
      if (m) return { field: m[1].split('.') };
      if (part.includes('{')) throw new Error(`unsupported HTTP path template ${template}`);
      return part;
    });
}

/** Every `/api/v1` binding of the services, literal segments first so `…/workflows/count`-style paths win over variables. */
export function apiRoutes(services: GatewayService[]): Route[] {
  const routes: Route[] = [];
  for (const svc of services) {
    const service = root.lookupService(svc.name);
    for (const method of service.methodsArray) {
      for (const opt of method.parsedOptions ?? []) {
        const rule = (opt as Record<string, HttpRule | undefined>)['(google.api.http)'];
        if (!rule) continue;
        for (const binding of [rule, ...([] as HttpRule[]).concat(rule.additional_bindings ?? [])]) {
          for (const verb of VERBS) {
            const template = binding[verb];
            if (!template?.startsWith(PREFIX)) continue;
            routes.push({ verb: verb.toUpperCase(), segments: parseTemplate(template), body: binding.body, method, handler: svc.handlers[method.name] });
          }
        }
      }
    }
  }
  const literalRank = (r: Route) => r.segments.map((s) => (typeof s === 'string' ? '0' : '1')).join('');
  return routes.sort((a, b) => (literalRank(a) < literalRank(b) ? -1 : literalRank(a) > literalRank(b) ? 1 : 0));
}

function match(route: Route, parts: string[]): Record<string, string> | undefined {
  if (route.segments.length !== parts.length) return undefined;
  const vars: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const seg = route.segments[i];
    if (typeof seg === 'string') {
      if (seg !== parts[i]) return undefined;
    } else {
      if (!parts[i]) return undefined;
      vars[seg.field.join('.')] = parts[i];
    }
  }
  return vars;
}

/** grpc-gateway's HTTP status for each gRPC code. */
export function httpStatusFor(code: number): number {
  switch (code) {
    case status.OK:
      return 200;
    case status.CANCELLED:
      return 499;
    case status.INVALID_ARGUMENT:
    case status.FAILED_PRECONDITION:
    case status.OUT_OF_RANGE:
      return 400;
    case status.DEADLINE_EXCEEDED:
      return 504;
    case status.NOT_FOUND:
      return 404;
    case status.ALREADY_EXISTS:
    case status.ABORTED:
      return 409;
    case status.PERMISSION_DENIED:
      return 403;
    case status.UNAUTHENTICATED:
      return 401;
    case status.RESOURCE_EXHAUSTED:
      return 429;
    case status.UNIMPLEMENTED:
      return 501;
    case status.UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

export interface ApiReply {
  status: number;
  body: Json;
}

export function errorReply(code: number, message: string, details: Json[] = []): ApiReply {
  return { status: httpStatusFor(code), body: { code, message, details } };
}

export function rpcErrorReply(err: RpcError): ApiReply {
  const details: Json[] = [];
  if (err.detail) {
    const type = root.lookupType(err.detail.typeName);
    const body = messageToJson(type, type.decode(err.detail.value) as unknown as Record<string, unknown>) as Record<string, Json>;
    details.push({ '@type': `type.googleapis.com/${err.detail.typeName}`, ...body });
  }
  return errorReply(err.code, err.message, details);
}

/** Sets `value` at a dotted field path of a JSON object. */
function setPath(obj: Record<string, Json>, path: string[], value: Json): void {
  let o = obj;
  for (const key of path.slice(0, -1)) {
    const next = o[key];
    o = (next && typeof next === 'object' && !Array.isArray(next) ? next : (o[key] = {})) as Record<string, Json>;
  }
  o[path[path.length - 1]] = value;
}

export interface ApiRequest {
  verb: string;
  /** Path below the host, starting `/api/v1/`, without the query string. */
  path: string;
  query: URLSearchParams;
  /** Parsed JSON body, if any. */
  body?: Json;
  ctx: CallContext;
}

/** The routing and translation half of the API, free of sockets so tests and the server share it. */
export class Gateway {
  readonly routes: Route[];

  constructor(
    services: GatewayService[],
    private readonly log: Logger,
  ) {
    this.routes = apiRoutes(services);
  }

  /** Whether some route serves `method` (e.g. `UpdateWorkflowExecution`) with a handler. */
  implements(methodName: string): boolean {
    return this.routes.some((r) => r.method.name === methodName && r.handler);
  }

  /** undefined when no route matches the path at all. */
  async handle(req: ApiRequest): Promise<ApiReply | undefined> {
    let parts: string[];
    try {
      parts = req.path.slice(1).split('/').map(decodeURIComponent);
    } catch {
      return errorReply(status.INVALID_ARGUMENT, 'malformed percent-encoding in the path');
    }
    let pathMatched = false;
    for (const route of this.routes) {
      const vars = match(route, parts);
      if (!vars) continue;
      pathMatched = true;
      if (route.verb !== req.verb) continue;
      return this.call(route, vars, req);
    }
    return pathMatched ? errorReply(status.UNIMPLEMENTED, 'Method Not Allowed') : undefined;
  }

  private async call(route: Route, vars: Record<string, string>, req: ApiRequest): Promise<ApiReply> {
    const method = route.method;
    if (!route.handler) return errorReply(status.UNIMPLEMENTED, `${method.name} is not implemented by the dev server`);
    const reqType = method.resolvedRequestType as protobuf.Type;
    const resType = method.resolvedResponseType as protobuf.Type;
    try {
      const json: Record<string, Json> = {};
      if (route.body === '*') {
        if (req.body !== undefined) {
          if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body))
            throw new RpcError(status.INVALID_ARGUMENT, 'the request body must be a JSON object');
          Object.assign(json, req.body);
        }
      } else {
        if (route.body && req.body !== undefined) json[route.body] = req.body;
        queryToJson(reqType, req.query, json);
      }
      for (const [path, value] of Object.entries(vars)) setPath(json, path.split('.'), value);
      // Through the wire format, so handlers see exactly what the gRPC path gives them.
      const request = reqType.decode(reqType.encode(reqType.fromObject(messageFromJson(reqType, json))).finish());
      const result = await route.handler(request, req.ctx);
      const message = Buffer.isBuffer(result) ? resType.decode(result) : resType.decode(resType.encode(result).finish());
      return { status: 200, body: messageToJson(resType, message as unknown as Record<string, unknown>) };
    } catch (err) {
      if (err instanceof RpcError) return rpcErrorReply(err);
      this.log.error({ err, method: method.name }, 'internal error in HTTP API handler');
      return errorReply(status.INTERNAL, err instanceof Error ? err.message : String(err));
    }
  }
}

/** A CallContext for an HTTP request: cancelled when the client goes away before the answer. */
export function httpCallContext(req: http.IncomingMessage, res: http.ServerResponse): CallContext {
  let cancelled = false;
  const listeners: Array<() => void> = [];
  res.once('close', () => {
    if (res.writableFinished) return;
    cancelled = true;
    for (const fn of listeners.splice(0)) fn();
  });
  return {
    get cancelled() {
      return cancelled;
    },
    onCancel(fn) {
      if (cancelled) fn();
      else listeners.push(fn);
    },
    msUntilDeadline: () => Infinity,
  };
}
